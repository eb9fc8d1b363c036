//! Profile records (`itsme_profile`), docs/PROTOCOL.md section 18.

use super::*;

/// Largest profile record, in bytes (the relay's default record limit).
pub const PROFILE_RECORD_MAX: usize = sys::ITSME_PROFILE_RECORD_MAX;
/// Bytes of the record format around the three values: a record is this
/// plus the lengths of the name, the photo and the filename.
pub const PROFILE_RECORD_OVERHEAD: usize = sys::ITSME_PROFILE_RECORD_OVERHEAD;
/// Size of a record ID.
pub const RECORD_ID_BYTES: usize = sys::ITSME_RECORD_ID_BYTES;
/// Size of a [`ProfileReference`]: record ID and record key.
pub const PROFILE_REFERENCE_BYTES: usize = sys::ITSME_PROFILE_REFERENCE_BYTES;
/// Longest photo filename, in UTF-8 bytes.
pub const PHOTO_FILENAME_MAX_BYTES: usize = sys::ITSME_PHOTO_FILENAME_MAX_BYTES;

/// The reference of a profile record: its record ID followed by its record
/// key ([`PROFILE_REFERENCE_BYTES`]).
///
/// A secret: whoever holds it can read the profile.  Give it only through
/// an encrypted, authenticated channel ([`OnlineVerify::share_profile`]),
/// never in a QR code, and never log it.  `Debug` does not show it,
/// equality is checked in constant time, and dropping it wipes it from
/// memory.  It dereferences to its bytes, so
/// `&reference` can be passed wherever a `&[u8]` is taken.
pub struct ProfileReference([u8; PROFILE_REFERENCE_BYTES]);

impl ProfileReference {
    /// A reference from its bytes, e.g. one received from the owner in a
    /// channel of the host's own.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] unless `bytes` is
    /// [`PROFILE_REFERENCE_BYTES`] long.
    pub fn from_bytes(bytes: &[u8]) -> Result<ProfileReference> {
        let array = <[u8; PROFILE_REFERENCE_BYTES]>::try_from(bytes).map_err(|_| {
            Error::new(
                sys::ITSME_E_INVALID_ARGUMENT,
                format!("a profile reference is {PROFILE_REFERENCE_BYTES} bytes, got {}", bytes.len()),
            )
        })?;
        Ok(ProfileReference(array))
    }

    /// The reference's bytes: record ID, then record key.
    pub fn as_bytes(&self) -> &[u8; PROFILE_REFERENCE_BYTES] {
        &self.0
    }

    /// The record ID it names (not secret: the relay stores the record
    /// under it).
    pub fn record_id(&self) -> [u8; RECORD_ID_BYTES] {
        let mut id = [0u8; RECORD_ID_BYTES];
        id.copy_from_slice(&self.0[..RECORD_ID_BYTES]);
        id
    }

    /// The relay's name for the record: the record ID in 32 lowercase
    /// hexadecimal digits, for `GET /v1/records/{id}`.
    pub fn record_name(&self) -> String {
        self.0[..RECORD_ID_BYTES].iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

impl std::ops::Deref for ProfileReference {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for ProfileReference {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Clone for ProfileReference {
    fn clone(&self) -> ProfileReference {
        ProfileReference(self.0)
    }
}

impl PartialEq for ProfileReference {
    /// Compares in constant time.
    fn eq(&self, other: &ProfileReference) -> bool {
        let difference = self.0.iter().zip(other.0.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        // SAFETY: reading a valid local through a volatile read only keeps
        // the compiler from turning the fold into an early exit.
        unsafe { ptr::read_volatile(&difference) == 0 }
    }
}

impl Eq for ProfileReference {}

impl Drop for ProfileReference {
    fn drop(&mut self) {
        wipe(&mut self.0);
    }
}

impl fmt::Debug for ProfileReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProfileReference(..)")
    }
}

/// Reads a reference the library writes into `call(out, cap, out_len)`,
/// wiping the buffer on failure.
pub(crate) fn read_reference(
    call: impl FnOnce(*mut u8, usize, *mut usize) -> i32,
) -> std::result::Result<ProfileReference, Failure> {
    let mut reference = ProfileReference([0u8; PROFILE_REFERENCE_BYTES]);
    let mut len = 0usize;
    match call(reference.0.as_mut_ptr(), PROFILE_REFERENCE_BYTES, &mut len) {
        sys::ITSME_OK if len == PROFILE_REFERENCE_BYTES => Ok(reference),
        sys::ITSME_OK | sys::ITSME_E_BUFFER_TOO_SMALL => Err(Failure::Binding(Error::internal(format!(
            "libitsme wrote a profile reference of {len} bytes, not {PROFILE_REFERENCE_BYTES}"
        )))),
        code => Err(Failure::Code(code)),
    }
}

/// A profile record (`itsme_profile`): a person's name and photo, sealed
/// field by field under a random record key and authenticated together
/// with the owner's identity key.
///
/// The owner makes one with [`Profile::create`], publishes
/// [`Profile::record`] on the relay (`PUT /v1/records/{id}`, `id` being
/// [`Profile::record_name`]) and gives contacts [`Profile::reference`]
/// inside an Online Verify ([`OnlineVerify::share_profile`]).  A contact
/// fetches the record, opens it with [`Profile::open`] (which checks every
/// MAC, the owner and the record ID before decrypting anything), shows the
/// values and, if the person agrees, applies them
/// ([`ContactStore::apply_profile`]).  Records are immutable: a new name or
/// photo is a new record.
///
/// A profile is immutable and may be shared between threads.  Dropping it
/// wipes its record key.  `Debug` shows nothing of its contents.
///
/// ```
/// use itsme::{Identity, Profile, SecretStore};
/// let alice = Identity::create(&SecretStore::memory()?, "Alice")?;
/// let mine = Profile::create(&alice, "Alice Smith", b"\x89PNG...", "alice.png", None)?;
/// let (record, reference) = (mine.record()?, mine.reference()?);
/// assert_eq!(record.len(), itsme::PROFILE_RECORD_OVERHEAD + 11 + 7 + 9);
/// // A contact, holding Alice's key, fetched `record` and received `reference`.
/// let theirs = Profile::open(&record, &reference, &alice.public_key()?)?;
/// assert_eq!(theirs.name()?, "Alice Smith");
/// assert_eq!(theirs.photo()?, b"\x89PNG...");
/// assert_eq!(theirs.photo_filename()?, "alice.png");
/// assert_eq!(theirs.record_name()?, reference.record_name());
/// # Ok::<(), itsme::Error>(())
/// ```
pub struct Profile {
    raw: NonNull<sys::itsme_profile>,
}

// SAFETY: the header makes an itsme_profile immutable, readable by several
// threads at once; the handle is tied to no thread.
unsafe impl Send for Profile {}
// SAFETY: see above.
unsafe impl Sync for Profile {}

/// A failure of a profile getter.  A profile keeps no last-error message,
/// so the detail names the getter.
fn profile_getter(function: &str) -> impl FnOnce(Failure) -> Error + '_ {
    move |failure| failure.into_error(|| format!("{function} failed"))
}

impl Profile {
    /// Makes a new profile record for `identity`, with a fresh record key
    /// and nonces drawn from `rng` (`None`: the operating system; a
    /// [`DeterministicRandom`] for tests only).
    ///
    /// `name`: empty for none, else 1 to [`NAME_MAX_BYTES`] bytes without
    /// control characters.  `photo`: the image's bytes, empty for none (the
    /// library does not read the format).  `photo_filename`: empty for
    /// none, else 1 to [`PHOTO_FILENAME_MAX_BYTES`] bytes without control
    /// characters, `/` or `\`; it needs a photo.  A name or a photo is
    /// required, and the record ([`PROFILE_RECORD_OVERHEAD`] plus the three
    /// lengths) must fit in [`PROFILE_RECORD_MAX`].
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (with a detail),
    /// [`ErrorKind::OutOfMemory`].
    pub fn create(
        identity: &Identity,
        name: &str,
        photo: &[u8],
        photo_filename: &str,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<Profile> {
        init()?;
        let name = CText::arg(name, "the name")?;
        let filename = CText::arg(photo_filename, "the photo filename")?;
        let rng = exchange::raw_rng(rng);
        let photo_ptr = if photo.is_empty() { ptr::null() } else { photo.as_ptr() };
        let mut out = ptr::null_mut();
        // SAFETY: a live identity (which the header lets several threads
        // use); NUL-terminated texts; the photo valid for its length (NULL
        // when empty); a live random source borrowed exclusively (or NULL);
        // out a valid place.
        let code = unsafe {
            sys::itsme_profile_create(
                identity.raw.as_ptr(),
                name.as_ptr(),
                photo_ptr,
                photo.len(),
                filename.as_ptr(),
                rng,
                &mut out,
            )
        };
        Profile::constructed(code, out, "itsme_profile_create")
    }

    /// Opens record bytes fetched from the relay with the reference the
    /// owner sent ([`PROFILE_REFERENCE_BYTES`]; a [`ProfileReference`]
    /// dereferences to one) and the owner's identity key (the contact's
    /// public key).  The size and shape are checked first, then every field
    /// MAC, the record MAC (which covers the owner's key) and the record ID,
    /// in constant time, before anything is decrypted; then the values.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a reference or key of the
    /// wrong size), [`ErrorKind::MalformedMessage`] (larger than
    /// [`PROFILE_RECORD_MAX`], truncated, another version, values that
    /// break the rules), [`ErrorKind::AuthenticationFailed`] (a tampered
    /// byte, a wrong record ID or key, another owner).  Each with a detail.
    pub fn open(record: &[u8], reference: &[u8], owner_key: &[u8]) -> Result<Profile> {
        init()?;
        let mut out = ptr::null_mut();
        // SAFETY: each slice valid for its length; out a valid place.
        let code = unsafe {
            sys::itsme_profile_open(
                record.as_ptr(),
                record.len(),
                reference.as_ptr(),
                reference.len(),
                owner_key.as_ptr(),
                owner_key.len(),
                &mut out,
            )
        };
        Profile::constructed(code, out, "itsme_profile_open")
    }

    fn constructed(code: i32, out: *mut sys::itsme_profile, function: &str) -> Result<Profile> {
        if code != sys::ITSME_OK {
            return Err(Error::new(code, thread_detail()));
        }
        NonNull::new(out)
            .map(|raw| Profile { raw })
            .ok_or_else(|| Error::internal(format!("{function} succeeded without a handle")))
    }

    /// The raw handle, for [`ContactStore::apply_profile`].
    pub(crate) fn as_raw(&self) -> *const sys::itsme_profile {
        self.raw.as_ptr()
    }

    /// The name; empty if the profile has none.
    pub fn name(&self) -> Result<String> {
        let raw = self.as_raw();
        read_string(NAME_MAX_BYTES + 1, |out, cap, len| {
            // SAFETY: a live profile; out valid for cap bytes.
            unsafe { sys::itsme_profile_name(raw, out, cap, len) }
        })
        .map_err(profile_getter("itsme_profile_name"))
    }

    /// The photo's bytes; empty if the profile has none.
    pub fn photo(&self) -> Result<Vec<u8>> {
        let raw = self.as_raw();
        read_bytes(16 * 1024, |out, cap, len| {
            // SAFETY: a live profile; out valid for cap bytes.
            unsafe { sys::itsme_profile_photo(raw, out, cap, len) }
        })
        .map_err(profile_getter("itsme_profile_photo"))
    }

    /// The photo's filename; empty if none.
    pub fn photo_filename(&self) -> Result<String> {
        let raw = self.as_raw();
        read_string(PHOTO_FILENAME_MAX_BYTES + 1, |out, cap, len| {
            // SAFETY: a live profile; out valid for cap bytes.
            unsafe { sys::itsme_profile_photo_filename(raw, out, cap, len) }
        })
        .map_err(profile_getter("itsme_profile_photo_filename"))
    }

    /// The sealed record, as stored on the relay.
    pub fn record(&self) -> Result<Vec<u8>> {
        let raw = self.as_raw();
        read_bytes(16 * 1024, |out, cap, len| {
            // SAFETY: a live profile; out valid for cap bytes.
            unsafe { sys::itsme_profile_record(raw, out, cap, len) }
        })
        .map_err(profile_getter("itsme_profile_record"))
    }

    /// The record ID ([`RECORD_ID_BYTES`]).
    pub fn record_id(&self) -> Result<[u8; RECORD_ID_BYTES]> {
        let raw = self.as_raw();
        let bytes = read_bytes(RECORD_ID_BYTES, |out, cap, len| {
            // SAFETY: a live profile; out valid for cap bytes.
            unsafe { sys::itsme_profile_record_id(raw, out, cap, len) }
        })
        .map_err(profile_getter("itsme_profile_record_id"))?;
        <[u8; RECORD_ID_BYTES]>::try_from(bytes.as_slice())
            .map_err(|_| Error::internal(format!("libitsme returned a record ID of {} bytes", bytes.len())))
    }

    /// The relay's name for the record: the record ID in 32 lowercase
    /// hexadecimal digits (`PUT /v1/records/{id}`).
    pub fn record_name(&self) -> Result<String> {
        let raw = self.as_raw();
        read_string(sys::ITSME_RECORD_NAME_SIZE, |out, cap, len| {
            // SAFETY: a live profile; out valid for cap bytes.
            unsafe { sys::itsme_profile_record_name(raw, out, cap, len) }
        })
        .map_err(profile_getter("itsme_profile_record_name"))
    }

    /// The reference (record ID and record key), a secret: give it only
    /// through an encrypted, authenticated channel
    /// ([`OnlineVerify::share_profile`]).
    pub fn reference(&self) -> Result<ProfileReference> {
        let raw = self.as_raw();
        read_reference(|out, cap, len| {
            // SAFETY: a live profile; out valid for cap bytes.
            unsafe { sys::itsme_profile_reference(raw, out, cap, len) }
        })
        .map_err(profile_getter("itsme_profile_reference"))
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_profile_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile").field("raw", &self.raw).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_hide_their_key() {
        let mut bytes = [0u8; PROFILE_REFERENCE_BYTES];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = 0xA0 + i as u8;
        }
        let reference = ProfileReference::from_bytes(&bytes).unwrap();
        let shown = format!("{reference:?}");
        assert_eq!(shown, "ProfileReference(..)");
        assert_eq!(reference.record_name(), "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
        assert_eq!(reference.record_id(), bytes[..16]);
        assert_eq!(&reference[..], &bytes[..]);
        assert_eq!(reference, reference.clone());
        bytes[31] ^= 1;
        assert_ne!(reference, ProfileReference::from_bytes(&bytes).unwrap());
        for wrong in [0usize, 16, 31, 33] {
            let error = ProfileReference::from_bytes(&vec![0; wrong]).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{wrong}");
        }
    }
}
