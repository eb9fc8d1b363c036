//! Service approvals, docs/PROTOCOL.md section 19: a service lets a person
//! approve a login on their device.
//!
//! Scope lists cross the C interface as text, scopes separated by single
//! spaces; this API takes and returns them as lists.

use super::*;
use std::cell::RefCell;

/// Size of a credential ID.
pub const CREDENTIAL_ID_BYTES: usize = sys::ITSME_CREDENTIAL_ID_BYTES;
/// Longest service ID, in bytes (printable ASCII).
pub const SERVICE_ID_MAX_BYTES: usize = sys::ITSME_SERVICE_ID_MAX_BYTES;
/// Longest session ID, in bytes (printable ASCII).
pub const SESSION_ID_MAX_BYTES: usize = sys::ITSME_SESSION_ID_MAX_BYTES;
/// Most scopes in a list.
pub const SCOPES_MAX: usize = sys::ITSME_SCOPES_MAX;
/// Longest scope, in bytes (printable ASCII).
pub const SCOPE_MAX_BYTES: usize = sys::ITSME_SCOPE_MAX_BYTES;
/// Largest enrollment message.
pub const ENROLLMENT_MAX: usize = sys::ITSME_ENROLLMENT_MAX;
/// Largest request.
pub const APPROVAL_REQUEST_MAX: usize = sys::ITSME_APPROVAL_REQUEST_MAX;
/// Largest approval.
pub const APPROVAL_MAX: usize = sys::ITSME_APPROVAL_MAX;
/// Longest lifetime of a request, in seconds.
pub const APPROVAL_LIFETIME_MAX: i64 = sys::ITSME_APPROVAL_LIFETIME_MAX;

/// The person's answer to a request (`itsme_approval_decision`).
///
/// Converts to and from the C value: `u32::from(decision)` and
/// `ApprovalDecision::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// Approve, granting some of the requested scopes
    /// (`ITSME_APPROVAL_APPROVE`).
    Approve,
    /// Deny; no scope is granted (`ITSME_APPROVAL_DENY`).
    Deny,
}

impl ApprovalDecision {
    /// The C value of this decision.
    pub fn code(self) -> sys::itsme_approval_decision {
        match self {
            ApprovalDecision::Approve => sys::ITSME_APPROVAL_APPROVE,
            ApprovalDecision::Deny => sys::ITSME_APPROVAL_DENY,
        }
    }

    /// The decision of a C value, or `None` for one this binding does not
    /// know.
    pub fn from_code(code: sys::itsme_approval_decision) -> Option<Self> {
        match code {
            sys::ITSME_APPROVAL_APPROVE => Some(ApprovalDecision::Approve),
            sys::ITSME_APPROVAL_DENY => Some(ApprovalDecision::Deny),
            _ => None,
        }
    }
}

impl From<ApprovalDecision> for u32 {
    fn from(decision: ApprovalDecision) -> u32 {
        decision.code()
    }
}

impl TryFrom<u32> for ApprovalDecision {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        ApprovalDecision::from_code(code)
            .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown approval decision {code}")))
    }
}

// ---------------------------------------------------------------------------
// Scope lists and fixed-size text fields
// ---------------------------------------------------------------------------

/// A scope list as the C interface takes it: the scopes joined by single
/// spaces.  A scope that is empty or holds a space would change the list,
/// so it is refused here; the library checks the rest.
fn scopes_arg(scopes: &[&str], what: &str) -> Result<CText> {
    if let Some(bad) = scopes.iter().find(|scope| scope.is_empty() || scope.contains(' ')) {
        return Err(Error::new(
            sys::ITSME_E_INVALID_ARGUMENT,
            format!("{what}: a scope is 1 to {SCOPE_MAX_BYTES} bytes of printable ASCII without spaces, got {bad:?}"),
        ));
    }
    CText::arg(&scopes.join(" "), what)
}

/// The text of a NUL-terminated `char` array the library filled.
fn field_text(field: &[c_char], what: &str) -> Result<String> {
    let bytes: Vec<u8> = field.iter().map(|&c| c as u8).collect();
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| Error::internal(format!("libitsme returned {what} without its NUL")))?;
    String::from_utf8(bytes[..end].to_vec())
        .map_err(|_| Error::internal(format!("libitsme returned {what} that is not UTF-8")))
}

/// A scope list the library wrote as text.
fn field_scopes(field: &[c_char], what: &str) -> Result<Vec<String>> {
    let text = field_text(field, what)?;
    Ok(if text.is_empty() { Vec::new() } else { text.split(' ').map(str::to_owned).collect() })
}

// ---------------------------------------------------------------------------
// The device
// ---------------------------------------------------------------------------

/// A request as the device shows it, read by [`ApprovalRequest::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The service's ID (`bank.example`): show it, with the name.
    pub service_id: String,
    /// The service's name, to show.
    pub service_name: String,
    /// The service's session ID.
    pub session_id: String,
    /// The six-digit code the service shows too: the person compares them.
    pub otp: String,
    /// When the service issued the request (unix seconds).
    pub issued_at: i64,
    /// When it expires (unix seconds).
    pub expires_at: i64,
    /// The requested scopes, in increasing byte order.
    pub scopes: Vec<String>,
}

impl ApprovalRequest {
    /// Reads a request to show it: strictly parsed, and refused once `now`
    /// is past its expiry.
    ///
    /// Errors: [`ErrorKind::MalformedMessage`], [`ErrorKind::Expired`],
    /// with a detail.
    pub fn parse(request: &[u8], now: i64) -> Result<ApprovalRequest> {
        init()?;
        let mut info = sys::itsme_approval_request_info::default();
        // SAFETY: the request valid for its length; info a valid place.
        let code = unsafe { sys::itsme_approval_request_parse(request.as_ptr(), request.len(), now, &mut info) };
        if code != sys::ITSME_OK {
            return Err(Error::new(code, thread_detail()));
        }
        Ok(ApprovalRequest {
            service_id: field_text(&info.service_id, "a service ID")?,
            service_name: field_text(&info.service_name, "a service name")?,
            session_id: field_text(&info.session_id, "a session ID")?,
            otp: field_text(&info.otp, "an OTP")?,
            issued_at: info.issued_at,
            expires_at: info.expires_at,
            scopes: field_scopes(&info.scopes, "the scopes")?,
        })
    }
}

impl SecretStore {
    /// Runs a call on this store's handle and adds its last-error detail to
    /// a failure.
    fn store_call<T>(
        &self,
        body: impl FnOnce(*mut sys::itsme_secret_store) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        let raw = self.raw.as_ptr();
        detailed(|| body(raw))
    }

    /// Device side: enrolls this device with a service.  Makes a new
    /// Ed25519 key pair for `service_id` (1 to [`SERVICE_ID_MAX_BYTES`]
    /// bytes of printable ASCII), replacing the one this device had for
    /// that service, saves it in this store, and returns the enrollment
    /// message for the service, signed over its `nonce` (16 to 64 bytes).
    /// `label` names the device for the service ("Alice's phone": 1 to
    /// [`NAME_MAX_BYTES`] bytes without control, invisible or bidi-override
    /// characters).  The key is
    /// drawn from `rng` (`None`: the operating system; a
    /// [`DeterministicRandom`] for tests only).  Each service gets its own
    /// key, so services cannot link one person across services.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`], [`ErrorKind::SecretStore`],
    /// with the store's detail.
    pub fn enroll(
        &self,
        service_id: &str,
        label: &str,
        nonce: &[u8],
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<Vec<u8>> {
        init()?;
        let service_id = CText::arg(service_id, "the service ID")?;
        let label = CText::arg(label, "the label")?;
        let rng = exchange::raw_rng(rng);
        self.store_call(|raw| {
            // The buffer fits every enrollment, so the key is saved on the
            // first call.
            read_bytes(ENROLLMENT_MAX, |out, cap, len| {
                // SAFETY: live store; NUL-terminated texts; the nonce valid
                // for its length; a live random source borrowed exclusively
                // (or NULL); out valid for cap bytes.
                unsafe {
                    sys::itsme_credential_enroll(
                        raw,
                        service_id.as_ptr(),
                        label.as_ptr(),
                        nonce.as_ptr(),
                        nonce.len(),
                        rng,
                        out,
                        cap,
                        len,
                    )
                }
            })
        })
    }

    /// Device side: the credential ID this device holds for `service_id`.
    ///
    /// Errors: [`ErrorKind::NotFound`] (not enrolled),
    /// [`ErrorKind::InvalidArgument`], [`ErrorKind::CorruptData`],
    /// [`ErrorKind::SecretStore`].
    pub fn credential_id(&self, service_id: &str) -> Result<[u8; CREDENTIAL_ID_BYTES]> {
        let service_id = CText::arg(service_id, "the service ID")?;
        let bytes = self.store_call(|raw| {
            read_bytes(CREDENTIAL_ID_BYTES, |out, cap, len| {
                // SAFETY: live store; NUL-terminated text; out valid for cap
                // bytes.
                unsafe { sys::itsme_credential_id(raw, service_id.as_ptr(), out, cap, len) }
            })
        })?;
        <[u8; CREDENTIAL_ID_BYTES]>::try_from(bytes.as_slice())
            .map_err(|_| Error::internal(format!("libitsme returned a credential ID of {} bytes", bytes.len())))
    }

    /// Device side: deletes this device's key for `service_id` (the
    /// service should remove the credential too).
    ///
    /// Errors: [`ErrorKind::NotFound`], [`ErrorKind::InvalidArgument`],
    /// [`ErrorKind::SecretStore`].
    pub fn remove_credential(&self, service_id: &str) -> Result<()> {
        let service_id = CText::arg(service_id, "the service ID")?;
        // SAFETY: live store; NUL-terminated text.
        self.store_call(|raw| code_result(unsafe { sys::itsme_credential_remove(raw, service_id.as_ptr()) }))
    }

    /// Device side: answers a request with the key enrolled for its
    /// service, signing at `now`: [`ApprovalDecision::Approve`] with
    /// `granted_scopes` (some of the requested ones, in any order; empty
    /// for none), or [`ApprovalDecision::Deny`] (with no scope).  Returns
    /// the approval for the service.
    ///
    /// Have the person compare the OTP with the service's screen first,
    /// and unlock the device (biometrics, a PIN).  Comparing the OTP does
    /// not stop a phishing site that relays a real request in real time
    /// (PROTOCOL.md 19.6): show [`ApprovalRequest::service_id`] too.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a scope not requested, a
    /// repeated one, a scope with a denial), [`ErrorKind::MalformedMessage`],
    /// [`ErrorKind::Expired`], [`ErrorKind::NotFound`] (no key for the
    /// service), [`ErrorKind::CorruptData`], [`ErrorKind::SecretStore`],
    /// with the store's detail.
    pub fn sign_approval(
        &self,
        request: &[u8],
        decision: ApprovalDecision,
        granted_scopes: &[&str],
        now: i64,
    ) -> Result<Vec<u8>> {
        init()?;
        let granted = scopes_arg(granted_scopes, "the granted scopes")?;
        self.store_call(|raw| {
            read_bytes(APPROVAL_MAX, |out, cap, len| {
                // SAFETY: live store; the request valid for its length;
                // NUL-terminated scopes; out valid for cap bytes.
                unsafe {
                    sys::itsme_approval_sign(
                        raw,
                        request.as_ptr(),
                        request.len(),
                        decision.code(),
                        granted.as_ptr(),
                        now,
                        out,
                        cap,
                        len,
                    )
                }
            })
        })
    }
}

// ---------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------

/// What a service learns from a valid enrollment ([`verify_enrollment`]):
/// store it with the user's account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Names the key in approvals ([`ApprovalResult::credential_id`]).
    pub credential_id: [u8; CREDENTIAL_ID_BYTES],
    /// The device's Ed25519 public key for this service, to pass to
    /// [`verify_approval`].
    pub public_key: [u8; PUBLIC_KEY_BYTES],
    /// The device's label, to list it.
    pub label: String,
}

/// Service side: checks an enrollment against the service's own
/// `service_id` and the `nonce` it issued (never values read from the
/// message).  Spend the nonce afterwards: it is good for one enrollment.
///
/// Errors: [`ErrorKind::InvalidArgument`] (a bad service ID or nonce),
/// [`ErrorKind::MalformedMessage`], [`ErrorKind::AuthenticationFailed`]
/// (a bad signature, another nonce or service), [`ErrorKind::InvalidKey`],
/// with a detail.
pub fn verify_enrollment(service_id: &str, nonce: &[u8], enrollment: &[u8]) -> Result<Credential> {
    init()?;
    let service_id = CText::arg(service_id, "the service ID")?;
    let mut info = sys::itsme_credential_info::default();
    // SAFETY: NUL-terminated text; slices valid for their lengths; info a
    // valid place.
    let code = unsafe {
        sys::itsme_enrollment_verify(
            service_id.as_ptr(),
            nonce.as_ptr(),
            nonce.len(),
            enrollment.as_ptr(),
            enrollment.len(),
            &mut info,
        )
    };
    if code != sys::ITSME_OK {
        return Err(Error::new(code, thread_detail()));
    }
    Ok(Credential {
        credential_id: info.credential_id,
        public_key: info.public_key,
        label: field_text(&info.label, "a label")?,
    })
}

/// Service side: makes a request, issued at `now` and expiring `lifetime`
/// seconds later (1 to [`APPROVAL_LIFETIME_MAX`]), with a fresh nonce and a
/// uniform six-digit OTP drawn from `rng` (`None`: the operating system; a
/// [`DeterministicRandom`] for tests only).
///
/// `service_id`: 1 to [`SERVICE_ID_MAX_BYTES`] bytes of printable ASCII;
/// `service_name`: a name (1 to [`NAME_MAX_BYTES`] bytes); `session_id`: 1
/// to [`SESSION_ID_MAX_BYTES`] bytes of printable ASCII; `scopes`: at most
/// [`SCOPES_MAX`], each 1 to [`SCOPE_MAX_BYTES`] bytes of printable ASCII,
/// in any order, none repeated.  Keep the bytes: they are the record
/// [`verify_approval`] checks against.  Show the OTP
/// ([`ApprovalRequest::parse`] reads it).
///
/// Errors: [`ErrorKind::InvalidArgument`], with a detail.
pub fn create_approval_request(
    service_id: &str,
    service_name: &str,
    session_id: &str,
    scopes: &[&str],
    lifetime: i64,
    now: i64,
    rng: Option<&mut DeterministicRandom>,
) -> Result<Vec<u8>> {
    init()?;
    let service_id = CText::arg(service_id, "the service ID")?;
    let service_name = CText::arg(service_name, "the service name")?;
    let session_id = CText::arg(session_id, "the session ID")?;
    let scopes = scopes_arg(scopes, "the scopes")?;
    let rng = exchange::raw_rng(rng);
    read_bytes(APPROVAL_REQUEST_MAX, |out, cap, len| {
        // SAFETY: NUL-terminated texts; a live random source borrowed
        // exclusively (or NULL); out valid for cap bytes.
        unsafe {
            sys::itsme_approval_request_create(
                service_id.as_ptr(),
                service_name.as_ptr(),
                session_id.as_ptr(),
                scopes.as_ptr(),
                lifetime,
                rng,
                now,
                out,
                cap,
                len,
            )
        }
    })
    .map_err(|failure| failure.into_error(thread_detail))
}

/// What a verified approval says ([`verify_approval`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalResult {
    /// Approved or denied: a verified denial is a success too.
    pub decision: ApprovalDecision,
    /// Which enrolled key signed.
    pub credential_id: [u8; CREDENTIAL_ID_BYTES],
    /// The device's clock when it signed (informational: clocks drift).
    pub timestamp: i64,
    /// The granted scopes in increasing byte order; empty for none, and
    /// always for a denial.
    pub granted_scopes: Vec<String>,
}

/// A replay store implemented in Rust, for [`ReplayStore::from_backend`];
/// any `FnMut(&[u8; 32], i64, i64) -> Result<bool> + Send` closure is one
/// ([`ReplayStore::from_fn`]).
///
/// `insert(key, expires_at, now)` records `key` until `expires_at` (it may
/// be forgotten after that) and returns `Ok(true)` if it was recorded
/// already (leave it then), `Ok(false)` if it is new.  It must be atomic
/// across every verifier sharing the store (a unique key in a database
/// table); within one [`ReplayStore`] this binding calls it under a lock.
/// An error refuses the approval with the error's code (a success or
/// buffer code becomes [`ErrorKind::Internal`]); a panic is caught and
/// refuses it as [`ErrorKind::Internal`].  It must not call into this
/// crate.
pub trait ReplayStoreBackend: Send {
    /// Records `key` until `expires_at`; `now` is the verifier's clock.
    fn insert(&mut self, key: &[u8; 32], expires_at: i64, now: i64) -> Result<bool>;
}

impl<F> ReplayStoreBackend for F
where
    F: FnMut(&[u8; 32], i64, i64) -> Result<bool> + Send,
{
    fn insert(&mut self, key: &[u8; 32], expires_at: i64, now: i64) -> Result<bool> {
        self(key, expires_at, now)
    }
}

type ReplayBox = Mutex<Box<dyn ReplayStoreBackend>>;

thread_local! {
    /// The error the last replay callback on this thread returned, for the
    /// verification that called it.
    static REPLAY_FAILURE: RefCell<Option<Error>> = const { RefCell::new(None) };
}

fn set_replay_failure(error: Option<Error>) -> Option<Error> {
    REPLAY_FAILURE.try_with(|slot| slot.replace(error)).unwrap_or(None)
}

unsafe extern "C" fn replay_insert(
    ctx: *mut c_void,
    key: *const u8,
    expires_at: i64,
    now: i64,
    out_seen: *mut bool,
) -> i32 {
    if ctx.is_null() || key.is_null() || out_seen.is_null() {
        return sys::ITSME_E_INVALID_ARGUMENT;
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ctx is the pointer made by ReplayStore::from_backend, alive
        // until destroy; the Mutex makes concurrent calls safe.
        let backend = unsafe { &*ctx.cast::<ReplayBox>() };
        // SAFETY: the library passes 32 readable bytes for the call.
        let key = unsafe { &*key.cast::<[u8; 32]>() };
        let mut backend = crate::lock(backend);
        backend.insert(key, expires_at, now)
    }));
    let result = match outcome {
        Ok(result) => result,
        Err(payload) => {
            // Dropping the payload could itself panic; leak it instead.
            std::mem::forget(payload);
            Err(Error::internal("the replay store panicked"))
        }
    };
    match result {
        Ok(seen) => {
            // SAFETY: checked non-null above.
            unsafe { *out_seen = seen };
            sys::ITSME_OK
        }
        Err(mut error) => {
            if matches!(error.code, sys::ITSME_OK | sys::ITSME_E_BUFFER_TOO_SMALL) {
                error = Error::internal(format!("the replay store failed with code {}: {}", error.code, error.detail));
            }
            let code = error.code;
            set_replay_failure(Some(error));
            code
        }
    }
}

unsafe extern "C" fn replay_destroy(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    let dropped = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ctx was made by Box::into_raw in from_backend and the
        // library calls destroy exactly once.
        drop(unsafe { Box::from_raw(ctx.cast::<ReplayBox>()) });
    }));
    if let Err(payload) = dropped {
        std::mem::forget(payload);
    }
}

/// A service's record of spent approval requests (`itsme_replay_store`):
/// in memory ([`ReplayStore::memory`]) or your own
/// ([`ReplayStore::from_fn`], [`ReplayStore::from_backend`]), e.g. a
/// database table shared by every server.
///
/// A store may be shared between threads and used by several
/// verifications at once.
pub struct ReplayStore {
    raw: NonNull<sys::itsme_replay_store>,
}

// SAFETY: the header lets an itsme_replay_store be used by several threads
// at once (the in-memory store locks; this binding's callback store calls
// its backend, which is Send, under a Mutex); the handle is tied to no
// thread.
unsafe impl Send for ReplayStore {}
// SAFETY: see above.
unsafe impl Sync for ReplayStore {}

impl ReplayStore {
    /// An in-memory store: entries are dropped once expired; at most
    /// `capacity` live entries (0: 1,000,000).  A verification that would
    /// add to a full store is refused with [`ErrorKind::Locked`] rather
    /// than forgetting a live entry.  One process only: servers sharing
    /// the requests need a shared store.
    pub fn memory(capacity: usize) -> Result<ReplayStore> {
        init()?;
        let mut out = ptr::null_mut();
        // SAFETY: out is a valid place.
        let code = unsafe { sys::itsme_replay_store_new_memory(capacity, &mut out) };
        ReplayStore::constructed(code, out, "itsme_replay_store_new_memory")
    }

    /// A store whose inserts call `insert(key, expires_at, now)`, which
    /// returns whether the key was recorded already (see
    /// [`ReplayStoreBackend`]).
    ///
    /// ```
    /// use std::collections::HashMap;
    /// let mut seen: HashMap<[u8; 32], i64> = HashMap::new();
    /// let store = itsme::ReplayStore::from_fn(move |key, expires_at, now| {
    ///     seen.retain(|_, until| *until >= now);
    ///     Ok(seen.insert(*key, expires_at).is_some())
    /// })?;
    /// # drop(store);
    /// # Ok::<(), itsme::Error>(())
    /// ```
    pub fn from_fn<F>(insert: F) -> Result<ReplayStore>
    where
        F: FnMut(&[u8; 32], i64, i64) -> Result<bool> + Send + 'static,
    {
        ReplayStore::from_backend(Box::new(insert))
    }

    /// A store backed by your own [`ReplayStoreBackend`], which the store
    /// owns and drops when it is dropped.
    pub fn from_backend(backend: Box<dyn ReplayStoreBackend>) -> Result<ReplayStore> {
        init()?;
        let ctx: *mut ReplayBox = Box::into_raw(Box::new(Mutex::new(backend)));
        let callbacks =
            sys::itsme_replay_store_callbacks {
                version: sys::ITSME_REPLAY_STORE_CALLBACKS_VERSION,
                ctx: ctx.cast(),
                insert: Some(replay_insert),
                destroy: Some(replay_destroy),
            };
        let mut out = ptr::null_mut();
        // SAFETY: the table is valid for the call (the library copies it);
        // out is a valid place.
        let code = unsafe { sys::itsme_replay_store_new_callbacks(&callbacks, &mut out) };
        if code != sys::ITSME_OK {
            // On failure the caller keeps ctx.
            // SAFETY: ctx came from Box::into_raw above and was not taken.
            drop(unsafe { Box::from_raw(ctx) });
        }
        ReplayStore::constructed(code, out, "itsme_replay_store_new_callbacks")
    }

    fn constructed(code: i32, out: *mut sys::itsme_replay_store, function: &str) -> Result<ReplayStore> {
        if code != sys::ITSME_OK {
            return Err(Error::new(code, thread_detail()));
        }
        NonNull::new(out)
            .map(|raw| ReplayStore { raw })
            .ok_or_else(|| Error::internal(format!("{function} succeeded without a handle")))
    }
}

impl Drop for ReplayStore {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_replay_store_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for ReplayStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayStore").field("raw", &self.raw).finish()
    }
}

/// Service side: verifies `approval` against the service's own record of
/// the request (`request`: the bytes [`create_approval_request`] gave), the
/// user's enrolled public keys ([`Credential::public_key`]), the service's
/// clock `now` and `replay`, in the order of PROTOCOL.md 19.5.  Only a
/// valid answer is recorded in `replay`, so a forged one cannot spend the
/// request.  A verified denial is a success with
/// [`ApprovalDecision::Deny`].
///
/// Errors: [`ErrorKind::InvalidArgument`] (a request that does not parse),
/// [`ErrorKind::MalformedMessage`] (the approval does not parse, or grants
/// a scope not requested), [`ErrorKind::Expired`], [`ErrorKind::NotFound`]
/// (signed by no enrolled key), [`ErrorKind::AuthenticationFailed`] (wrong
/// OTP, bad signature), [`ErrorKind::Replayed`], [`ErrorKind::Locked`] (an
/// in-memory store is full), or a [`ReplayStoreBackend`]'s error.
///
/// ```
/// use itsme::{ApprovalDecision, ApprovalRequest, ReplayStore, SecretStore};
/// let now = 1_800_000_000;
/// // The device enrolls with the service, which checks the enrollment.
/// let device = SecretStore::memory()?;
/// let nonce = [9u8; 16]; // issued by the service
/// let enrollment = device.enroll("bank.example", "Alice's phone", &nonce, None)?;
/// let credential = itsme::verify_enrollment("bank.example", &nonce, &enrollment)?;
/// // A login: the service makes a request and shows its OTP.
/// let request = itsme::create_approval_request(
///     "bank.example", "Example Bank", "session-42", &["email", "profile"], 120, now, None)?;
/// // The device shows it; the person compares the OTP and approves.
/// let shown = ApprovalRequest::parse(&request, now + 5)?;
/// assert_eq!((shown.service_name.as_str(), shown.scopes.len()), ("Example Bank", 2));
/// let approval = device.sign_approval(&request, ApprovalDecision::Approve, &["email"], now + 10)?;
/// // The service verifies the answer, once.
/// let replay = ReplayStore::memory(0)?;
/// let result = itsme::verify_approval(&request, &approval, &[credential.public_key], &replay, now + 11)?;
/// assert_eq!(result.decision, ApprovalDecision::Approve);
/// assert_eq!(result.granted_scopes, ["email"]);
/// let again = itsme::verify_approval(&request, &approval, &[credential.public_key], &replay, now + 12);
/// assert_eq!(again.unwrap_err().kind(), itsme::ErrorKind::Replayed);
/// # Ok::<(), itsme::Error>(())
/// ```
pub fn verify_approval(
    request: &[u8],
    approval: &[u8],
    public_keys: &[[u8; PUBLIC_KEY_BYTES]],
    replay: &ReplayStore,
    now: i64,
) -> Result<ApprovalResult> {
    init()?;
    let mut out = sys::itsme_approval_result::default();
    set_replay_failure(None);
    // SAFETY: the slices valid for their lengths (the keys are contiguous:
    // key_count times 32 bytes); a live replay store, which the header lets
    // several threads use; out a valid place.
    let code = unsafe {
        sys::itsme_approval_verify(
            request.as_ptr(),
            request.len(),
            approval.as_ptr(),
            approval.len(),
            public_keys.as_ptr().cast::<u8>(),
            public_keys.len(),
            replay.raw.as_ptr(),
            now,
            &mut out,
        )
    };
    let callback_failure = set_replay_failure(None);
    if code != sys::ITSME_OK {
        let library_detail = thread_detail();
        return Err(match callback_failure {
            // The replay store's own error, as it returned it.
            Some(error) if error.code == code && !error.detail.is_empty() => error,
            _ => Error::new(code, library_detail),
        });
    }
    let decision = ApprovalDecision::from_code(out.decision).ok_or_else(|| {
        Error::internal(format!("libitsme returned approval decision {}, unknown to this binding", out.decision))
    })?;
    Ok(ApprovalResult {
        decision,
        credential_id: out.credential_id,
        timestamp: out.timestamp,
        granted_scopes: field_scopes(&out.granted_scopes, "the granted scopes")?,
    })
}

#[cfg(test)]
mod tests {
    //! The replay callbacks, called directly as the library would.

    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn decisions_round_trip() {
        for decision in [ApprovalDecision::Approve, ApprovalDecision::Deny] {
            assert_eq!(ApprovalDecision::from_code(decision.code()), Some(decision));
            assert_eq!(ApprovalDecision::try_from(u32::from(decision)).unwrap(), decision);
        }
        assert_eq!(ApprovalDecision::from_code(0), None);
        assert_eq!(ApprovalDecision::try_from(3).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn scope_lists() {
        assert_eq!(scopes_arg(&[], "s").unwrap().0, b"\0");
        assert_eq!(scopes_arg(&["b", "a"], "s").unwrap().0, b"b a\0");
        for bad in [&[""][..], &["a b"], &["a", ""], &["a\0"]] {
            assert_eq!(scopes_arg(bad, "s").err().map(|e| e.kind()), Some(ErrorKind::InvalidArgument), "{bad:?}");
        }
        let mut field = [0 as c_char; 16];
        assert_eq!(field_scopes(&field, "x").unwrap(), Vec::<String>::new());
        for (i, &b) in b"a bc".iter().enumerate() {
            field[i] = b as c_char;
        }
        assert_eq!(field_scopes(&field, "x").unwrap(), ["a", "bc"]);
        let full = [b'a' as c_char; 4];
        assert_eq!(field_text(&full, "x").unwrap_err().kind(), ErrorKind::Internal);
    }

    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn ctx(backend: impl ReplayStoreBackend + 'static) -> *mut c_void {
        let boxed: Box<dyn ReplayStoreBackend> = Box::new(backend);
        Box::into_raw(Box::new(Mutex::new(boxed))).cast()
    }

    #[test]
    fn insert_reports_seen_errors_and_panics() {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Flag(dropped.clone());
        let mut keys: Vec<[u8; 32]> = Vec::new();
        let ctx = ctx(move |key: &[u8; 32], expires_at: i64, now: i64| {
            let _flag = &flag;
            match key[0] {
                0xEE => Err(Error::new(sys::ITSME_E_DATABASE, "the table is gone")),
                0xE0 => Err(Error::new(sys::ITSME_OK, "not an error code")),
                0xFF => panic!("replay panic (expected by the test)"),
                _ => {
                    assert!(expires_at > now);
                    let seen = keys.contains(key);
                    if !seen {
                        keys.push(*key);
                    }
                    Ok(seen)
                }
            }
        });
        let mut seen = true;
        unsafe {
            let key = [1u8; 32];
            assert_eq!(replay_insert(ctx, key.as_ptr(), 20, 10, &mut seen), sys::ITSME_OK);
            assert!(!seen);
            assert_eq!(replay_insert(ctx, key.as_ptr(), 20, 10, &mut seen), sys::ITSME_OK);
            assert!(seen);
            assert_eq!(replay_insert(ctx, ptr::null(), 20, 10, &mut seen), sys::ITSME_E_INVALID_ARGUMENT);
            assert_eq!(replay_insert(ctx, key.as_ptr(), 20, 10, ptr::null_mut()), sys::ITSME_E_INVALID_ARGUMENT);
            assert_eq!(replay_insert(ptr::null_mut(), key.as_ptr(), 20, 10, &mut seen), sys::ITSME_E_INVALID_ARGUMENT);
            set_replay_failure(None);
            seen = true;
            assert_eq!(replay_insert(ctx, [0xEE; 32].as_ptr(), 20, 10, &mut seen), sys::ITSME_E_DATABASE);
            assert_eq!(set_replay_failure(None).unwrap().detail, "the table is gone");
            assert_eq!(replay_insert(ctx, [0xE0; 32].as_ptr(), 20, 10, &mut seen), sys::ITSME_E_INTERNAL);
            assert_eq!(replay_insert(ctx, [0xFF; 32].as_ptr(), 20, 10, &mut seen), sys::ITSME_E_INTERNAL);
            assert_eq!(set_replay_failure(None).unwrap().detail, "the replay store panicked");
            assert!(seen, "written on failure");
            // The poisoned lock is taken over: the store still works.
            assert_eq!(replay_insert(ctx, [2; 32].as_ptr(), 20, 10, &mut seen), sys::ITSME_OK);
            assert!(!seen);
            assert!(!dropped.load(Ordering::SeqCst));
            replay_destroy(ctx);
            replay_destroy(ptr::null_mut());
        }
        assert!(dropped.load(Ordering::SeqCst));
    }
}
