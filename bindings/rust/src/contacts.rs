//! The encrypted contact store (`itsme_store`) and contact snapshots.

use super::*;

/// Seed size in bytes: the verification secret shared with a contact.
pub const SEED_BYTES: usize = sys::ITSME_SEED_BYTES;
/// Longest note, in UTF-8 bytes.
pub const NOTE_MAX_BYTES: usize = sys::ITSME_NOTE_MAX_BYTES;

/// What [`ContactStore::accept_loss`] gave up (`itsme_store_loss`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLoss {
    /// The file was not the store last seen at its path (emptied, deleted
    /// or swapped); `commits_lost` is then 0, as it cannot be known.
    pub replaced: bool,
    /// Commits the file was behind the last one this device saw.
    pub commits_lost: u64,
    /// Contacts at the last commit seen.
    pub contacts_before: u64,
    /// Contacts in the file now.
    pub contacts_now: u64,
    /// Contact rows the file's last commit counted that it lacked.
    pub contacts_missing: u64,
    /// Photo rows it lacked.
    pub photos_missing: u64,
    /// Device-secret rows it lacked.
    pub device_secrets_missing: u64,
    /// Contacts whose photo was lost (kept, without a photo).
    pub contacts_without_their_photo: u64,
}

impl StoreLoss {
    /// True when the store was whole: accepting changed nothing.
    pub fn nothing_lost(&self) -> bool {
        !self.replaced
            && self.commits_lost == 0
            && self.contacts_missing == 0
            && self.photos_missing == 0
            && self.device_secrets_missing == 0
            && self.contacts_without_their_photo == 0
    }
}

/// A contact's verification state (`itsme_verification_state`).
///
/// Converts to and from the C value: `u32::from(state)` and
/// `VerificationState::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VerificationState {
    /// Not verified yet (`ITSME_CONTACT_UNVERIFIED`).
    Unverified,
    /// Verified (`ITSME_CONTACT_VERIFIED`).
    Verified,
    /// Their device changed: verification still works, the change is shown
    /// (`ITSME_CONTACT_DEGRADED`).
    Degraded,
    /// Added by an exchange whose SAS this side confirmed while the peer's
    /// confirmation has not arrived: not usable for verification until its
    /// exchange settles it (`ITSME_CONTACT_AWAITING_PEER`,
    /// docs/PROTOCOL.md 8.1).
    AwaitingPeer,
}

impl VerificationState {
    /// The C value of this state.
    pub fn code(self) -> sys::itsme_verification_state {
        match self {
            VerificationState::Unverified => sys::ITSME_CONTACT_UNVERIFIED,
            VerificationState::Verified => sys::ITSME_CONTACT_VERIFIED,
            VerificationState::Degraded => sys::ITSME_CONTACT_DEGRADED,
            VerificationState::AwaitingPeer => sys::ITSME_CONTACT_AWAITING_PEER,
        }
    }

    /// The state of a C value, or `None` for one this binding does not know.
    pub fn from_code(code: sys::itsme_verification_state) -> Option<Self> {
        match code {
            sys::ITSME_CONTACT_UNVERIFIED => Some(VerificationState::Unverified),
            sys::ITSME_CONTACT_VERIFIED => Some(VerificationState::Verified),
            sys::ITSME_CONTACT_DEGRADED => Some(VerificationState::Degraded),
            sys::ITSME_CONTACT_AWAITING_PEER => Some(VerificationState::AwaitingPeer),
            _ => None,
        }
    }
}

impl From<VerificationState> for u32 {
    fn from(state: VerificationState) -> u32 {
        state.code()
    }
}

impl TryFrom<u32> for VerificationState {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        VerificationState::from_code(code).ok_or_else(|| {
            Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown verification state {code}"))
        })
    }
}

/// How the exchange with a contact happened (`itsme_exchange_method`).
///
/// Converts to and from the C value: `u32::from(method)` and
/// `ExchangeMethod::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExchangeMethod {
    /// QR codes, in person (`ITSME_EXCHANGE_QR`).
    Qr,
    /// Bluetooth, in person (`ITSME_EXCHANGE_BLUETOOTH`).
    Bluetooth,
    /// An invite (`ITSME_EXCHANGE_INVITE`).
    Invite,
    /// A real-time exchange (`ITSME_EXCHANGE_REALTIME`).
    Realtime,
}

impl ExchangeMethod {
    /// The C value of this method.
    pub fn code(self) -> sys::itsme_exchange_method {
        match self {
            ExchangeMethod::Qr => sys::ITSME_EXCHANGE_QR,
            ExchangeMethod::Bluetooth => sys::ITSME_EXCHANGE_BLUETOOTH,
            ExchangeMethod::Invite => sys::ITSME_EXCHANGE_INVITE,
            ExchangeMethod::Realtime => sys::ITSME_EXCHANGE_REALTIME,
        }
    }

    /// The method of a C value, or `None` for one this binding does not
    /// know.
    pub fn from_code(code: sys::itsme_exchange_method) -> Option<Self> {
        match code {
            sys::ITSME_EXCHANGE_QR => Some(ExchangeMethod::Qr),
            sys::ITSME_EXCHANGE_BLUETOOTH => Some(ExchangeMethod::Bluetooth),
            sys::ITSME_EXCHANGE_INVITE => Some(ExchangeMethod::Invite),
            sys::ITSME_EXCHANGE_REALTIME => Some(ExchangeMethod::Realtime),
            _ => None,
        }
    }
}

impl From<ExchangeMethod> for u32 {
    fn from(method: ExchangeMethod) -> u32 {
        method.code()
    }
}

impl TryFrom<u32> for ExchangeMethod {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        ExchangeMethod::from_code(code).ok_or_else(|| {
            Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown exchange method {code}"))
        })
    }
}

/// A contact as stored, read from a snapshot at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contact {
    /// Stable id; ids only grow and are never reused.
    pub id: i64,
    /// Display name.
    pub name: String,
    /// 16 uppercase hex digits, for display and lookup.
    pub fingerprint: String,
    /// The identity key; `None` for an unauthenticated (version-5) contact.
    pub public_key: Option<[u8; PUBLIC_KEY_BYTES]>,
    /// Verification state.
    pub state: VerificationState,
    /// A degradation the person confirmed.
    pub acknowledged: bool,
    /// How the exchange happened.
    pub method: ExchangeMethod,
    /// When the contact was added (unix seconds).
    pub created_at: i64,
    /// When it was last verified, if ever.
    pub verified_at: Option<i64>,
    /// The last verification window used, if any.
    pub last_window: Option<i64>,
    /// Free-form note.
    pub note: String,
}

/// A failure of a snapshot getter.  Snapshots keep no last-error message,
/// so the detail names the getter rather than borrowing the store's.
fn getter_failure(function: &str) -> impl FnOnce(Failure) -> Failure + '_ {
    move |failure| match failure {
        Failure::Code(code) => Failure::Binding(Error::new(code, format!("{function} failed"))),
        binding => binding,
    }
}

/// A getter's result code as a [`Failure`].
fn getter(code: i32, function: &str) -> std::result::Result<(), Failure> {
    match code {
        sys::ITSME_OK => Ok(()),
        code => Err(getter_failure(function)(Failure::Code(code))),
    }
}

/// A getter whose ITSME_E_NOT_FOUND means "none".
fn optional_getter(code: i32, value: i64, function: &str) -> std::result::Result<Option<i64>, Failure> {
    match code {
        sys::ITSME_E_NOT_FOUND => Ok(None),
        code => getter(code, function).map(|()| Some(value)),
    }
}

/// Owns a contact snapshot and frees it when dropped.
struct ContactHandle(NonNull<sys::itsme_contact>);

impl Drop for ContactHandle {
    fn drop(&mut self) {
        // SAFETY: a snapshot owned by this guard, freed exactly once.
        unsafe { sys::itsme_contact_free(self.0.as_ptr()) }
    }
}

/// Owns a contact list and frees it when dropped.
struct ListHandle(NonNull<sys::itsme_contact_list>);

impl Drop for ListHandle {
    fn drop(&mut self) {
        // SAFETY: a list owned by this guard, freed exactly once.
        unsafe { sys::itsme_contact_list_free(self.0.as_ptr()) }
    }
}

/// Reads every field of a snapshot the library handed over, then frees it
/// (also on failure).
fn take_contact(raw: *mut sys::itsme_contact, function: &str) -> std::result::Result<Contact, Failure> {
    let handle = ContactHandle(NonNull::new(raw).ok_or_else(|| {
        Failure::Binding(Error::internal(format!("{function} succeeded without a snapshot")))
    })?);
    let c: *const sys::itsme_contact = handle.0.as_ptr();
    let (mut id, mut created_at, mut verified, mut window) = (0i64, 0i64, 0i64, 0i64);
    let (mut state, mut method) = (0 as sys::itsme_verification_state, 0 as sys::itsme_exchange_method);
    let (mut acknowledged, mut authenticated) = (false, false);
    // SAFETY (every block below): c is a live snapshot owned by `handle`;
    // each output is a valid place, and buffers come from read_string or
    // read_bytes.
    unsafe {
        getter(sys::itsme_contact_id(c, &mut id), "itsme_contact_id")?;
        getter(sys::itsme_contact_state(c, &mut state, &mut acknowledged), "itsme_contact_state")?;
        getter(sys::itsme_contact_exchange_method(c, &mut method), "itsme_contact_exchange_method")?;
        getter(sys::itsme_contact_created_at(c, &mut created_at), "itsme_contact_created_at")?;
        getter(sys::itsme_contact_is_authenticated(c, &mut authenticated), "itsme_contact_is_authenticated")?;
    }
    let verified_at = optional_getter(
        // SAFETY: as above.
        unsafe { sys::itsme_contact_verified_at(c, &mut verified) },
        verified,
        "itsme_contact_verified_at",
    )?;
    let last_window = optional_getter(
        // SAFETY: as above.
        unsafe { sys::itsme_contact_last_window(c, &mut window) },
        window,
        "itsme_contact_last_window",
    )?;
    let name = read_string(64, |out, cap, len| {
        // SAFETY: as above.
        unsafe { sys::itsme_contact_name(c, out, cap, len) }
    })
    .map_err(getter_failure("itsme_contact_name"))?;
    let fingerprint = read_string(sys::ITSME_FINGERPRINT_SIZE, |out, cap, len| {
        // SAFETY: as above.
        unsafe { sys::itsme_contact_fingerprint(c, out, cap, len) }
    })
    .map_err(getter_failure("itsme_contact_fingerprint"))?;
    let note = read_string(256, |out, cap, len| {
        // SAFETY: as above.
        unsafe { sys::itsme_contact_note(c, out, cap, len) }
    })
    .map_err(getter_failure("itsme_contact_note"))?;
    let public_key = if authenticated {
        let bytes = read_bytes(PUBLIC_KEY_BYTES, |out, cap, len| {
            // SAFETY: as above.
            unsafe { sys::itsme_contact_public_key(c, out, cap, len) }
        })
        .map_err(getter_failure("itsme_contact_public_key"))?;
        Some(<[u8; PUBLIC_KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
            Failure::Binding(Error::internal(format!("libitsme returned a public key of {} bytes", bytes.len())))
        })?)
    } else {
        None
    };
    let state = VerificationState::from_code(state).ok_or_else(|| {
        Failure::Binding(Error::internal(format!("libitsme returned verification state {state}, unknown to this binding")))
    })?;
    let method = ExchangeMethod::from_code(method).ok_or_else(|| {
        Failure::Binding(Error::internal(format!("libitsme returned exchange method {method}, unknown to this binding")))
    })?;
    drop(handle);
    Ok(Contact {
        id,
        name,
        fingerprint,
        public_key,
        state,
        acknowledged,
        method,
        created_at,
        verified_at,
        last_window,
        note,
    })
}

/// Reads every contact of a list the library handed over, then frees it
/// (also on failure).
fn take_list(raw: *mut sys::itsme_contact_list, function: &str) -> std::result::Result<Vec<Contact>, Failure> {
    let list = ListHandle(NonNull::new(raw).ok_or_else(|| {
        Failure::Binding(Error::internal(format!("{function} succeeded without a list")))
    })?);
    let mut count = 0usize;
    // SAFETY: live list; count is a valid place.
    getter(unsafe { sys::itsme_contact_list_count(list.0.as_ptr(), &mut count) }, "itsme_contact_list_count")?;
    let mut contacts = Vec::with_capacity(count);
    for index in 0..count {
        let mut item = ptr::null_mut();
        // SAFETY: live list, index in range, item a valid place.
        getter(unsafe { sys::itsme_contact_list_get(list.0.as_ptr(), index, &mut item) }, "itsme_contact_list_get")?;
        contacts.push(take_contact(item, "itsme_contact_list_get")?);
    }
    Ok(contacts)
}

/// The encrypted contact store of an identity (`itsme_store`): one SQLite
/// file of sealed rows.
///
/// Every contact is sealed under the identity's contacts key and bound to
/// its row and to this store; lookups go through keyed indexes, so the file
/// holds no name, key, fingerprint or seed in the clear.  A change is
/// durable when the call that made it returns.
///
/// A store may be shared between threads (`Send + Sync`), and several
/// handles or processes may open one file.  Dropping it closes the handle.
/// Errors carry the handle's last-error detail.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("itsme-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// use itsme::{ContactStore, ExchangeMethod, Identity, SecretStore, VerificationState};
/// let secrets = SecretStore::memory()?;
/// let me = Identity::create(&secrets, "Alice")?;
/// let contacts = ContactStore::open(&me, dir.join("contacts.db"))?;
/// let bob_key = [0x42u8; 32];
/// let id = contacts.add("Bob", &bob_key, &[7u8; 32], ExchangeMethod::Qr, 1_800_000_000)?;
/// contacts.set_state(id, VerificationState::Verified, false, 1_800_000_060)?;
/// assert_eq!(contacts.get(id)?.verified_at, Some(1_800_000_060));
/// for contact in contacts.iter(100) {
///     let contact = contact?;
///     println!("{} {}", contact.fingerprint, contact.name);
/// }
/// # drop(contacts);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), itsme::Error>(())
/// ```
pub struct ContactStore {
    raw: NonNull<sys::itsme_store>,
}

// SAFETY: the header allows an itsme_store to be used from several threads
// at once (one serialised connection per handle).
unsafe impl Send for ContactStore {}
// SAFETY: see above.
unsafe impl Sync for ContactStore {}

impl ContactStore {
    /// Opens the contact store at `path` for `identity`, creating the file
    /// if missing.  The store keeps what it needs of the identity, which
    /// may be dropped first.
    ///
    /// Errors (with the identity's last-error detail):
    /// [`ErrorKind::InvalidArgument`] (a path that is not UTF-8 or contains
    /// a NUL byte), [`ErrorKind::WrongIdentity`] (the file belongs to
    /// another identity; nothing changed), [`ErrorKind::Database`] (cannot
    /// open or create the file, or it is not an ItsMe store),
    /// [`ErrorKind::CorruptData`], [`ErrorKind::SecretStore`].
    pub fn open(identity: &Identity, path: impl AsRef<Path>) -> Result<ContactStore> {
        init()?;
        let path = path_arg(path.as_ref())?;
        let mut out = ptr::null_mut();
        // SAFETY: live identity handle; NUL-terminated path; valid out.
        identity.call_code(|raw| unsafe { sys::itsme_store_open(raw, path.as_ptr(), &mut out) })?;
        NonNull::new(out)
            .map(|raw| ContactStore { raw })
            .ok_or_else(|| Error::internal("itsme_store_open succeeded without a handle"))
    }

    /// Accepts the loss that made [`ContactStore::open`] fail with
    /// [`ErrorKind::RolledBack`] (the file is behind, or is not, the store
    /// this device last saw at `path`) or [`ErrorKind::CorruptData`] (rows
    /// or photos lost): the file becomes the store as it is, and this
    /// device's mark is set to it.  Returns what was lost.  Call it only
    /// when the person chose to, after being shown the error.
    pub fn accept_loss(identity: &Identity, path: impl AsRef<Path>) -> Result<StoreLoss> {
        init()?;
        let path = path_arg(path.as_ref())?;
        let mut loss = sys::itsme_store_loss::default();
        // SAFETY: live identity handle; NUL-terminated path; valid out.
        identity.call_code(|raw| unsafe { sys::itsme_store_accept_loss(raw, path.as_ptr(), &mut loss) })?;
        Ok(StoreLoss {
            replaced: loss.replaced,
            commits_lost: loss.commits_lost,
            contacts_before: loss.contacts_before,
            contacts_now: loss.contacts_now,
            contacts_missing: loss.contacts_missing,
            photos_missing: loss.photos_missing,
            device_secrets_missing: loss.device_secrets_missing,
            contacts_without_their_photo: loss.contacts_without_their_photo,
        })
    }

    /// The raw handle, for an exchange saving into this store.  Such a call
    /// records its failure on the exchange, not on this handle, so it
    /// needs no `lock`.
    pub(crate) fn as_raw(&self) -> *mut sys::itsme_store {
        self.raw.as_ptr()
    }

    /// Runs a call on the handle and adds the handle's last-error detail to
    /// a failure.
    fn call<T>(&self, body: impl FnOnce(*mut sys::itsme_store) -> std::result::Result<T, Failure>) -> Result<T> {
        let raw = self.raw.as_ptr();
        detailed(|| body(raw))
    }

    /// Runs a call that only returns a result code.
    pub(crate) fn call_code(&self, body: impl FnOnce(*mut sys::itsme_store) -> i32) -> Result<()> {
        self.call(|raw| code_result(body(raw)))
    }

    /// Runs a call that hands over one snapshot, and reads it.
    fn snapshot(
        &self,
        function: &str,
        body: impl FnOnce(*mut sys::itsme_store, *mut *mut sys::itsme_contact) -> i32,
    ) -> Result<Contact> {
        self.call(|raw| {
            let mut out = ptr::null_mut();
            match body(raw, &mut out) {
                sys::ITSME_OK => take_contact(out, function),
                code => Err(Failure::Code(code)),
            }
        })
    }

    /// Runs a call that hands over a list, and reads it.
    fn list_of(
        &self,
        function: &str,
        body: impl FnOnce(*mut sys::itsme_store, *mut *mut sys::itsme_contact_list) -> i32,
    ) -> Result<Vec<Contact>> {
        self.call(|raw| {
            let mut out = ptr::null_mut();
            match body(raw, &mut out) {
                sys::ITSME_OK => take_list(out, function),
                code => Err(Failure::Code(code)),
            }
        })
    }

    /// Adds a contact with its identity public key ([`PUBLIC_KEY_BYTES`]),
    /// a display name (1 to [`NAME_MAX_BYTES`] bytes, no control
    /// characters), its verification seed ([`SEED_BYTES`]) and how the
    /// exchange happened, at `now` (unix seconds); returns the new id.  Ids
    /// only grow and are never reused.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (name, seed size, negative
    /// `now`), [`ErrorKind::InvalidKey`] (wrong key size, or the identity's
    /// own key), [`ErrorKind::AlreadyExists`] (a contact with this key
    /// exists), [`ErrorKind::Database`].
    pub fn add(&self, name: &str, public_key: &[u8], seed: &[u8], method: ExchangeMethod, now: i64) -> Result<i64> {
        let name = CText::arg(name, "the name")?;
        let mut id = 0i64;
        // SAFETY: live handle; NUL-terminated name; slices valid for their
        // lengths; id a valid place.
        self.call_code(|raw| unsafe {
            sys::itsme_store_add(
                raw,
                name.as_ptr(),
                public_key.as_ptr(),
                public_key.len(),
                seed.as_ptr(),
                seed.len(),
                method.code(),
                now,
                &mut id,
            )
        })?;
        Ok(id)
    }

    /// Adds an unauthenticated contact from the source's version-5 format,
    /// which carries a fingerprint (16 hexadecimal digits) but no key.  It
    /// is never merged with nor replaces a keyed contact.
    ///
    /// Errors: as [`ContactStore::add`], with [`ErrorKind::InvalidArgument`]
    /// for a bad fingerprint.
    pub fn add_unauthenticated(
        &self,
        name: &str,
        fingerprint: &str,
        seed: &[u8],
        method: ExchangeMethod,
        now: i64,
    ) -> Result<i64> {
        let name = CText::arg(name, "the name")?;
        let fingerprint = CText::arg(fingerprint, "the fingerprint")?;
        let mut id = 0i64;
        // SAFETY: live handle; NUL-terminated texts; seed valid for its
        // length; id a valid place.
        self.call_code(|raw| unsafe {
            sys::itsme_store_add_unauthenticated(
                raw,
                name.as_ptr(),
                fingerprint.as_ptr(),
                seed.as_ptr(),
                seed.len(),
                method.code(),
                now,
                &mut id,
            )
        })?;
        Ok(id)
    }

    /// The contact with this id.
    ///
    /// Errors: [`ErrorKind::NotFound`], [`ErrorKind::AuthenticationFailed`]
    /// (the sealed row was altered, swapped or copied from another store),
    /// [`ErrorKind::Database`].
    pub fn get(&self, id: i64) -> Result<Contact> {
        // SAFETY: live handle; valid out.
        self.snapshot("itsme_store_get", |raw, out| unsafe { sys::itsme_store_get(raw, id, out) })
    }

    /// The contact with this identity public key.
    ///
    /// Errors: as [`ContactStore::get`], and [`ErrorKind::InvalidArgument`]
    /// for a key that is not [`PUBLIC_KEY_BYTES`] long.
    pub fn get_by_key(&self, public_key: &[u8]) -> Result<Contact> {
        self.snapshot("itsme_store_get_by_key", |raw, out| {
            // SAFETY: live handle; key valid for its length; valid out.
            unsafe { sys::itsme_store_get_by_key(raw, public_key.as_ptr(), public_key.len(), out) }
        })
    }

    /// The contacts with this fingerprint (16 hexadecimal digits, either
    /// case): keyed contacts first, then unauthenticated ones; empty if
    /// none.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a bad fingerprint),
    /// [`ErrorKind::AuthenticationFailed`], [`ErrorKind::Database`].
    pub fn find_fingerprint(&self, fingerprint: &str) -> Result<Vec<Contact>> {
        let fingerprint = CText::arg(fingerprint, "the fingerprint")?;
        self.list_of("itsme_store_find_fingerprint", |raw, out| {
            // SAFETY: live handle; NUL-terminated text; valid out.
            unsafe { sys::itsme_store_find_fingerprint(raw, fingerprint.as_ptr(), out) }
        })
    }

    /// Up to `limit` contacts (0: no limit) with ids above `after_id`, in id
    /// order: pass 0, then the last id of each page.  See also
    /// [`ContactStore::iter`].
    ///
    /// Errors: [`ErrorKind::AuthenticationFailed`] (a record failed; its id
    /// is in the detail), [`ErrorKind::Database`].
    pub fn list(&self, after_id: i64, limit: usize) -> Result<Vec<Contact>> {
        // SAFETY: live handle; valid out.
        self.list_of("itsme_store_list", |raw, out| unsafe { sys::itsme_store_list(raw, after_id, limit, out) })
    }

    /// Every contact in id order, read `page_size` at a time (a
    /// `page_size` of 0 counts as 1) with [`ContactStore::list`].
    ///
    /// The iterator yields the error of a failed page and then ends.
    /// Contacts added while iterating appear if their ids are above the
    /// page being read.
    pub fn iter(&self, page_size: usize) -> ContactIter<'_> {
        ContactIter { store: self, page_size: page_size.max(1), after: 0, page: Vec::new().into_iter(), done: false }
    }

    /// The number of contacts.
    ///
    /// Errors: [`ErrorKind::Database`].
    pub fn count(&self) -> Result<u64> {
        let mut count = 0u64;
        // SAFETY: live handle; count a valid place.
        self.call_code(|raw| unsafe { sys::itsme_store_count(raw, &mut count) })?;
        Ok(count)
    }

    /// Deletes every contact still awaiting the peer's decision more than
    /// 24 hours after its exchange began; returns how many.  Exchanges do
    /// it when they save; call it at start, say, after abandoned exchanges.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (`now` out of range),
    /// [`ErrorKind::AuthenticationFailed`], [`ErrorKind::Database`].
    pub fn expire_awaiting(&self, now: i64) -> Result<u64> {
        let mut deleted = 0u64;
        // SAFETY: live handle; deleted a valid place.
        self.call_code(|raw| unsafe { sys::itsme_store_expire_awaiting(raw, now, &mut deleted) })?;
        Ok(deleted)
    }

    /// Writes a consistent copy of the whole store as one new file at
    /// `path`: a backup, or the file that moves to a new device with the
    /// identity ([`Import::install`]).  Safe while the store is in use; the
    /// copy holds what was committed when it started.  Records stay sealed,
    /// and its device secrets open only on this device.  Never overwrites a
    /// file.
    ///
    /// Errors: [`ErrorKind::AlreadyExists`] (`path` exists),
    /// [`ErrorKind::InvalidArgument`] (a path that is not UTF-8 or contains
    /// a NUL byte), [`ErrorKind::Database`] (e.g. the directory is not
    /// writable).
    pub fn backup(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path_arg(path.as_ref())?;
        // SAFETY: live handle; NUL-terminated path.
        self.call_code(|raw| unsafe { sys::itsme_store_backup(raw, path.as_ptr()) })
    }

    /// Renames a contact (1 to [`NAME_MAX_BYTES`] bytes, no control
    /// characters).
    ///
    /// Errors: [`ErrorKind::InvalidArgument`], [`ErrorKind::NotFound`],
    /// [`ErrorKind::AuthenticationFailed`], [`ErrorKind::Database`].
    pub fn set_name(&self, id: i64, name: &str) -> Result<()> {
        let name = CText::arg(name, "the name")?;
        // SAFETY: live handle; NUL-terminated text.
        self.call_code(|raw| unsafe { sys::itsme_store_set_name(raw, id, name.as_ptr()) })
    }

    /// Replaces a contact's free-form note (at most [`NOTE_MAX_BYTES`]
    /// bytes; empty for none).
    ///
    /// Errors: as [`ContactStore::set_name`].
    pub fn set_note(&self, id: i64, note: &str) -> Result<()> {
        let note = CText::arg(note, "the note")?;
        // SAFETY: live handle; NUL-terminated text.
        self.call_code(|raw| unsafe { sys::itsme_store_set_note(raw, id, note.as_ptr()) })
    }

    /// Sets a contact's state.  [`VerificationState::Verified`] records
    /// `now` as the verification time; `acknowledged` counts only with
    /// [`VerificationState::Degraded`]: the person confirmed the device
    /// change.
    ///
    /// Errors: as [`ContactStore::set_name`], and
    /// [`ErrorKind::InvalidArgument`] for a negative `now`.
    pub fn set_state(&self, id: i64, state: VerificationState, acknowledged: bool, now: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe {
            sys::itsme_store_set_state(raw, id, state.code(), acknowledged, now)
        })
    }

    /// Uses voice-verification window `window` for the contact: succeeds
    /// only if it is greater than the last window used.  The check and the
    /// update are one atomic step, so of two handles or processes racing
    /// for one window exactly one wins.
    ///
    /// Errors: [`ErrorKind::WindowUsed`], [`ErrorKind::InvalidArgument`]
    /// (a window outside 0 to 8446743359, the year 9999), and those of
    /// [`ContactStore::set_name`].
    pub fn use_window(&self, id: i64, window: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_store_use_window(raw, id, window) })
    }

    /// Applies an opened [`Profile`] to contact `id`, in one transaction:
    /// its name (if the profile has one) and its photo and filename (if it
    /// has a photo).  Open the profile with this contact's public key, and
    /// apply it only if the person agrees.
    ///
    /// Errors: [`ErrorKind::NotFound`] (no such contact),
    /// [`ErrorKind::Database`].
    pub fn apply_profile(&self, id: i64, profile: &Profile) -> Result<()> {
        let profile = profile.as_raw();
        // SAFETY: live handles (the borrow keeps the profile alive).
        self.call_code(|raw| unsafe { sys::itsme_store_apply_profile(raw, id, profile) })
    }

    /// Sets contact `id`'s photo (at most 524,288 bytes) and its filename
    /// (empty for none; at most [`PHOTO_FILENAME_MAX_BYTES`] bytes), sealed
    /// like the contact.  An empty photo and filename remove the photo.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`], [`ErrorKind::NotFound`],
    /// [`ErrorKind::Database`].
    pub fn set_photo(&self, id: i64, photo: &[u8], filename: &str) -> Result<()> {
        let filename = CText::arg(filename, "the photo filename")?;
        let photo_ptr = if photo.is_empty() { ptr::null() } else { photo.as_ptr() };
        // SAFETY: live handle; the photo valid for its length (NULL when
        // empty); NUL-terminated filename.
        self.call_code(|raw| unsafe { sys::itsme_store_set_photo(raw, id, photo_ptr, photo.len(), filename.as_ptr()) })
    }

    /// Contact `id`'s photo and its filename (empty if none).  Read in two
    /// calls under this handle's lock: a change made meanwhile through
    /// another handle may pair one photo with the other's filename.
    ///
    /// Errors: [`ErrorKind::NotFound`] (no such contact, or it has no
    /// photo), [`ErrorKind::CorruptData`], [`ErrorKind::Database`].
    pub fn photo(&self, id: i64) -> Result<(Vec<u8>, String)> {
        self.call(|raw| {
            let photo = read_bytes(64 * 1024, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_store_photo(raw, id, out, cap, len) }
            })?;
            let filename = read_string(PHOTO_FILENAME_MAX_BYTES + 1, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_store_photo_filename(raw, id, out, cap, len) }
            })?;
            Ok((photo, filename))
        })
    }

    /// Deletes a contact, with its photo and device secrets.
    ///
    /// Errors: [`ErrorKind::NotFound`], [`ErrorKind::Database`].
    pub fn delete(&self, id: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_store_delete(raw, id) })
    }

    /// For the person who changed devices (PROTOCOL.md section 10.2): the
    /// code to give contact `id` ("ABCD-EFGH-IJKL-MNOP-QRST-UVWX"), saying
    /// that the change is theirs.
    ///
    /// Draws a new interim device secret from `rng` (`None`: the operating
    /// system; a [`DeterministicRandom`] for tests only) and stores it as
    /// this device's secret for the contact.  Each call draws a new one, so
    /// only the code from the latest call matches this device's tags.
    ///
    /// Errors: [`ErrorKind::NotFound`], [`ErrorKind::Database`].
    pub fn degradation_code(&self, id: i64, rng: Option<&mut DeterministicRandom>) -> Result<String> {
        let rng = exchange::raw_rng(rng);
        self.call(|raw| {
            read_string(sys::ITSME_DEGRADATION_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; a live random source borrowed
                // exclusively (or NULL); out valid for cap bytes.
                unsafe { sys::itsme_store_degradation_code(raw, id, rng, out, cap, len) }
            })
        })
    }

    /// For the contact: checks at `now` the code the person who changed
    /// devices sent (any case; spaces and `-` are ignored), in constant
    /// time, under the attempt limiter.  A right code stores their interim
    /// device secret and marks the contact degraded with the change
    /// acknowledged; it never restores "verified".
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (not a degradation code: not
    /// counted), [`ErrorKind::AuthenticationFailed`] (a wrong code:
    /// counted), [`ErrorKind::Locked`] (too many wrong codes: wait, and try
    /// again), [`ErrorKind::NotFound`], [`ErrorKind::SecretStore`],
    /// [`ErrorKind::Database`].
    pub fn accept_degradation_code(&self, id: i64, code: &str, now: i64) -> Result<()> {
        let code = SecretText::arg(code, "the code")?;
        // SAFETY: live handle; NUL-terminated code.
        self.call_code(|raw| unsafe { sys::itsme_store_accept_degradation_code(raw, id, code.as_ptr(), now) })
    }
}

impl Drop for ContactStore {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_store_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for ContactStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContactStore").field("raw", &self.raw).finish()
    }
}

/// Every contact of a store in id order, a page at a time; made by
/// [`ContactStore::iter`].
pub struct ContactIter<'a> {
    store: &'a ContactStore,
    page_size: usize,
    /// The id of the last contact yielded.
    after: i64,
    page: std::vec::IntoIter<Contact>,
    done: bool,
}

impl Iterator for ContactIter<'_> {
    type Item = Result<Contact>;

    fn next(&mut self) -> Option<Result<Contact>> {
        if let Some(contact) = self.page.next() {
            self.after = contact.id;
            return Some(Ok(contact));
        }
        if self.done {
            return None;
        }
        match self.store.list(self.after, self.page_size) {
            Ok(page) => {
                // A short page is the last one.
                self.done = page.len() < self.page_size;
                self.page = page.into_iter();
                let contact = self.page.next();
                match contact {
                    Some(contact) => {
                        self.after = contact.id;
                        Some(Ok(contact))
                    }
                    None => {
                        self.done = true;
                        None
                    }
                }
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

impl fmt::Debug for ContactIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContactIter")
            .field("page_size", &self.page_size)
            .field("after", &self.after)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// A path argument as NUL-terminated bytes.
pub(crate) fn path_arg(path: &Path) -> Result<CText> {
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
    CText::new(bytes).ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, "the path contains a NUL byte"))
}
