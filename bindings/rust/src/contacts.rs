//! The encrypted contact store (`itsme_store`) and contact snapshots.

use super::*;

/// A contact's verification state (`itsme_verification_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerificationState {
    /// Not confirmed yet.
    Unverified,
    /// Confirmed with a short authentication string or a verification.
    Verified,
    /// Their device changed: verification still works, the change is shown.
    Degraded,
}

impl VerificationState {
    fn code(self) -> sys::itsme_verification_state {
        match self {
            VerificationState::Unverified => sys::ITSME_CONTACT_UNVERIFIED,
            VerificationState::Verified => sys::ITSME_CONTACT_VERIFIED,
            VerificationState::Degraded => sys::ITSME_CONTACT_DEGRADED,
        }
    }

    fn from_code(code: sys::itsme_verification_state) -> Result<Self> {
        match code {
            sys::ITSME_CONTACT_UNVERIFIED => Ok(VerificationState::Unverified),
            sys::ITSME_CONTACT_VERIFIED => Ok(VerificationState::Verified),
            sys::ITSME_CONTACT_DEGRADED => Ok(VerificationState::Degraded),
            other => Err(Error::internal(format!("unknown verification state {other}"))),
        }
    }
}

/// How the exchange with a contact happened (`itsme_exchange_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExchangeMethod {
    /// QR codes, in person.
    Qr,
    /// Bluetooth, in person.
    Bluetooth,
    /// An online invite through the relay.
    Invite,
    /// A real-time exchange in a relay room.
    Realtime,
}

impl ExchangeMethod {
    fn code(self) -> sys::itsme_exchange_method {
        match self {
            ExchangeMethod::Qr => sys::ITSME_EXCHANGE_QR,
            ExchangeMethod::Bluetooth => sys::ITSME_EXCHANGE_BLUETOOTH,
            ExchangeMethod::Invite => sys::ITSME_EXCHANGE_INVITE,
            ExchangeMethod::Realtime => sys::ITSME_EXCHANGE_REALTIME,
        }
    }

    fn from_code(code: sys::itsme_exchange_method) -> Result<Self> {
        match code {
            sys::ITSME_EXCHANGE_QR => Ok(ExchangeMethod::Qr),
            sys::ITSME_EXCHANGE_BLUETOOTH => Ok(ExchangeMethod::Bluetooth),
            sys::ITSME_EXCHANGE_INVITE => Ok(ExchangeMethod::Invite),
            sys::ITSME_EXCHANGE_REALTIME => Ok(ExchangeMethod::Realtime),
            other => Err(Error::internal(format!("unknown exchange method {other}"))),
        }
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

/// Reads a snapshot into a [`Contact`] and frees it.
fn take_contact(raw: *mut sys::itsme_contact) -> std::result::Result<Contact, Failure> {
    struct Guard(*mut sys::itsme_contact);
    impl Drop for Guard {
        fn drop(&mut self) {
            // SAFETY: a snapshot handle owned by this guard, freed once.
            unsafe { sys::itsme_contact_free(self.0) }
        }
    }
    let guard = Guard(raw);
    let c = guard.0 as *const sys::itsme_contact;
    let code = |code: i32| if code == sys::ITSME_OK { Ok(()) } else { Err(Failure::Code(code)) };
    let optional = |code: i32, value: i64| match code {
        sys::ITSME_OK => Ok(Some(value)),
        sys::ITSME_E_NOT_FOUND => Ok(None),
        other => Err(Failure::Code(other)),
    };
    let (mut id, mut created, mut verified, mut window) = (0i64, 0i64, 0i64, 0i64);
    let (mut state, mut method, mut acknowledged, mut authenticated) = (0u32, 0u32, 0 as c_int, 0 as c_int);
    // SAFETY: c is a live snapshot; every out pointer is a valid place.
    unsafe {
        code(sys::itsme_contact_id(c, &mut id))?;
        code(sys::itsme_contact_state(c, &mut state, &mut acknowledged))?;
        code(sys::itsme_contact_exchange_method(c, &mut method))?;
        code(sys::itsme_contact_created_at(c, &mut created))?;
        code(sys::itsme_contact_is_authenticated(c, &mut authenticated))?;
    }
    // SAFETY: as above.
    let verified_at = optional(unsafe { sys::itsme_contact_verified_at(c, &mut verified) }, verified)?;
    // SAFETY: as above.
    let last_window = optional(unsafe { sys::itsme_contact_last_window(c, &mut window) }, window)?;
    // SAFETY: live snapshot; buffers from read_string / read_bytes.
    let name = read_string(64, |out, cap, len| unsafe { sys::itsme_contact_name(c, out, cap, len) })?;
    // SAFETY: as above.
    let fingerprint =
        read_string(sys::ITSME_FINGERPRINT_SIZE, |out, cap, len| unsafe { sys::itsme_contact_fingerprint(c, out, cap, len) })?;
    // SAFETY: as above.
    let note = read_string(128, |out, cap, len| unsafe { sys::itsme_contact_note(c, out, cap, len) })?;
    let public_key = if authenticated != 0 {
        // SAFETY: as above.
        let bytes = read_bytes(PUBLIC_KEY_BYTES, |out, cap, len| unsafe { sys::itsme_contact_public_key(c, out, cap, len) })?;
        Some(<[u8; PUBLIC_KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
            Failure::Binding(Error::internal(format!("libitsme returned a key of {} bytes", bytes.len())))
        })?)
    } else {
        None
    };
    Ok(Contact {
        id,
        name,
        fingerprint,
        public_key,
        state: VerificationState::from_code(state).map_err(Failure::Binding)?,
        acknowledged: acknowledged != 0,
        method: ExchangeMethod::from_code(method).map_err(Failure::Binding)?,
        created_at: created,
        verified_at,
        last_window,
        note,
    })
}

/// Reads every snapshot of a list and frees it.
fn take_list(raw: *mut sys::itsme_contact_list) -> std::result::Result<Vec<Contact>, Failure> {
    struct Guard(*mut sys::itsme_contact_list);
    impl Drop for Guard {
        fn drop(&mut self) {
            // SAFETY: a list handle owned by this guard, freed once.
            unsafe { sys::itsme_contact_list_free(self.0) }
        }
    }
    let guard = Guard(raw);
    let mut count = 0usize;
    // SAFETY: live list; count is a valid place.
    match unsafe { sys::itsme_contact_list_count(guard.0, &mut count) } {
        sys::ITSME_OK => {}
        code => return Err(Failure::Code(code)),
    }
    let mut contacts = Vec::with_capacity(count);
    for index in 0..count {
        let mut item = ptr::null_mut();
        // SAFETY: live list, index in range, item a valid place.
        match unsafe { sys::itsme_contact_list_get(guard.0, index, &mut item) } {
            sys::ITSME_OK => contacts.push(take_contact(item)?),
            code => return Err(Failure::Code(code)),
        }
    }
    Ok(contacts)
}

/// The encrypted contact store of an identity (`itsme_store`).
///
/// Every contact is a sealed row; lookups go through keyed indexes; a change
/// is durable when its call returns.  May be shared between threads, and
/// several handles or processes may open one file.
pub struct ContactStore {
    raw: NonNull<sys::itsme_store>,
    /// Pairs each call with the last-error detail it left.
    lock: Mutex<()>,
}

// SAFETY: the header allows an itsme_store to be used from several threads.
unsafe impl Send for ContactStore {}
// SAFETY: see above.
unsafe impl Sync for ContactStore {}

impl Drop for ContactStore {
    fn drop(&mut self) {
        // SAFETY: the handle is owned and closed exactly once.
        unsafe { sys::itsme_store_close(self.raw.as_ptr()) }
    }
}

impl ContactStore {
    /// Opens (creating if missing) the store at `path` for `identity`.
    ///
    /// Errors: [`ErrorKind::WrongIdentity`] if the file belongs to another
    /// identity (nothing changed), [`ErrorKind::Database`] if it is not a
    /// contact store, [`ErrorKind::SecretStore`].
    pub fn open(identity: &Identity, path: impl AsRef<std::path::Path>) -> Result<ContactStore> {
        init()?;
        let path = path.as_ref().to_str().ok_or_else(|| {
            Error::new(sys::ITSME_E_INVALID_ARGUMENT, "the path is not valid UTF-8")
        })?;
        let path = CText::arg(path, "the path")?;
        let mut out = ptr::null_mut();
        // SAFETY: live identity handle; NUL-terminated path; valid out.
        identity.call_code(|raw| unsafe { sys::itsme_store_open(raw, path.as_ptr(), &mut out) })?;
        NonNull::new(out)
            .map(|raw| ContactStore { raw, lock: Mutex::new(()) })
            .ok_or_else(|| Error::internal("itsme_store_open returned no handle"))
    }

    fn call<T>(&self, body: impl FnOnce(*mut sys::itsme_store) -> std::result::Result<T, Failure>) -> Result<T> {
        let _guard = lock(&self.lock);
        let raw = self.raw.as_ptr();
        body(raw).map_err(|failure| {
            failure.into_error(|| {
                // SAFETY: raw is live; buffers come from read_string.
                read_detail(|buf, cap, len| unsafe { sys::itsme_store_last_error(raw, buf, cap, len) })
            })
        })
    }

    fn call_code(&self, body: impl FnOnce(*mut sys::itsme_store) -> i32) -> Result<()> {
        self.call(|raw| match body(raw) {
            sys::ITSME_OK => Ok(()),
            code => Err(Failure::Code(code)),
        })
    }

    /// Adds a contact identified by its identity key; returns its id.
    ///
    /// Errors: [`ErrorKind::AlreadyExists`], [`ErrorKind::InvalidKey`]
    /// (wrong size, or our own key), [`ErrorKind::InvalidArgument`].
    pub fn add(&self, name: &str, public_key: &[u8], seed: &[u8], method: ExchangeMethod, now: i64) -> Result<i64> {
        let name = CText::arg(name, "the name")?;
        let mut id = 0i64;
        // SAFETY: live handle; slices valid for their lengths; id a valid place.
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

    /// Adds an unauthenticated contact from the source's version-5 format
    /// (a fingerprint, no key).
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
        // SAFETY: live handle; NUL-terminated texts; seed valid; id a valid place.
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

    fn snapshot(&self, body: impl FnOnce(*mut sys::itsme_store, *mut *mut sys::itsme_contact) -> i32) -> Result<Contact> {
        self.call(|raw| {
            let mut out = ptr::null_mut();
            match body(raw, &mut out) {
                sys::ITSME_OK => take_contact(out),
                code => Err(Failure::Code(code)),
            }
        })
    }

    fn list_of(
        &self,
        body: impl FnOnce(*mut sys::itsme_store, *mut *mut sys::itsme_contact_list) -> i32,
    ) -> Result<Vec<Contact>> {
        self.call(|raw| {
            let mut out = ptr::null_mut();
            match body(raw, &mut out) {
                sys::ITSME_OK => take_list(out),
                code => Err(Failure::Code(code)),
            }
        })
    }

    /// The contact with this id; [`ErrorKind::NotFound`] if none,
    /// [`ErrorKind::AuthenticationFailed`] if its sealed row was altered.
    pub fn get(&self, id: i64) -> Result<Contact> {
        // SAFETY: live handle; valid out.
        self.snapshot(|raw, out| unsafe { sys::itsme_store_get(raw, id, out) })
    }

    /// The contact with this identity key.
    pub fn get_by_key(&self, public_key: &[u8]) -> Result<Contact> {
        // SAFETY: live handle; key valid for its length; valid out.
        self.snapshot(|raw, out| unsafe { sys::itsme_store_get_by_key(raw, public_key.as_ptr(), public_key.len(), out) })
    }

    /// The contacts with this fingerprint, keyed ones first.
    pub fn find_fingerprint(&self, fingerprint: &str) -> Result<Vec<Contact>> {
        let fingerprint = CText::arg(fingerprint, "the fingerprint")?;
        // SAFETY: live handle; NUL-terminated text; valid out.
        self.list_of(|raw, out| unsafe { sys::itsme_store_find_fingerprint(raw, fingerprint.as_ptr(), out) })
    }

    /// Up to `limit` contacts (0: all) with ids above `after_id`.
    pub fn list(&self, after_id: i64, limit: usize) -> Result<Vec<Contact>> {
        // SAFETY: live handle; valid out.
        self.list_of(|raw, out| unsafe { sys::itsme_store_list(raw, after_id, limit, out) })
    }

    /// Every contact in id order, read `page_size` at a time.
    pub fn iter(&self, page_size: usize) -> ContactIter<'_> {
        ContactIter { store: self, page_size: page_size.max(1), after: 0, page: Vec::new().into_iter(), done: false }
    }

    /// The number of contacts.
    pub fn count(&self) -> Result<u64> {
        let mut count = 0u64;
        // SAFETY: live handle; count a valid place.
        self.call_code(|raw| unsafe { sys::itsme_store_count(raw, &mut count) })?;
        Ok(count)
    }

    /// Renames a contact.
    pub fn set_name(&self, id: i64, name: &str) -> Result<()> {
        let name = CText::arg(name, "the name")?;
        // SAFETY: live handle; NUL-terminated text.
        self.call_code(|raw| unsafe { sys::itsme_store_set_name(raw, id, name.as_ptr()) })
    }

    /// Replaces a contact's note.
    pub fn set_note(&self, id: i64, note: &str) -> Result<()> {
        let note = CText::arg(note, "the note")?;
        // SAFETY: live handle; NUL-terminated text.
        self.call_code(|raw| unsafe { sys::itsme_store_set_note(raw, id, note.as_ptr()) })
    }

    /// Sets a contact's state; `Verified` records `now` as the
    /// verification time.
    pub fn set_state(&self, id: i64, state: VerificationState, acknowledged: bool, now: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_store_set_state(raw, id, state.code(), c_int::from(acknowledged), now) })
    }

    /// Uses a voice-verification window: [`ErrorKind::WindowUsed`] unless
    /// it is after the last one used. Atomic across handles and processes.
    pub fn use_window(&self, id: i64, window: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_store_use_window(raw, id, window) })
    }

    /// Deletes a contact with its photo and device secrets.
    pub fn delete(&self, id: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_store_delete(raw, id) })
    }
}

/// Every contact of a store in id order, a page at a time.
pub struct ContactIter<'a> {
    store: &'a ContactStore,
    page_size: usize,
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
                self.done = page.len() < self.page_size;
                self.page = page.into_iter();
                let contact = self.page.next()?;
                self.after = contact.id;
                Some(Ok(contact))
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}
