//! Contact exchange (`itsme_exchange`) in person and at a distance, short
//! codes and remote codes, the deterministic random source for tests, and
//! the protocol's pure derivations (docs/PROTOCOL.md sections 3 to 8 and
//! 16).

use super::*;

/// Number of short code values: 26 NATO words times 10,000 numbers.
pub const SHORT_CODE_VALUES: u32 = sys::ITSME_SHORT_CODE_VALUES as u32;
/// Longest QR payload text, in bytes.
pub const QR_PAYLOAD_MAX: usize = sys::ITSME_QR_PAYLOAD_MAX;
/// Longest Bluetooth frame, in bytes.
pub const BLUETOOTH_FRAME_MAX: usize = sys::ITSME_BLUETOOTH_FRAME_MAX;
/// Longest message of an exchange at a distance (invite or real-time), in
/// bytes: fits every relay limit.
pub const REMOTE_MESSAGE_MAX: usize = sys::ITSME_REMOTE_MESSAGE_MAX;

// ---------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------

/// A deterministic random source (`itsme_random`), for tests and test
/// vectors only.
///
/// The same seed replays the same bytes, so a test can reproduce the
/// protocol's test vectors through the library.  Functions that draw random
/// bytes take an `Option<&mut DeterministicRandom>`; `None` means the
/// operating system's generator, which is what real use needs.  **Never use
/// one for real keys**: anyone who knows the seed knows every key.
///
/// ```
/// use itsme::{DeterministicRandom, Identity, SecretStore};
/// let seed = [7u8; 32];
/// let a = Identity::create_with_random(&SecretStore::memory()?, "A", Some(&mut DeterministicRandom::new(&seed)?))?;
/// let b = Identity::create_with_random(&SecretStore::memory()?, "A", Some(&mut DeterministicRandom::new(&seed)?))?;
/// assert_eq!(a.public_key()?, b.public_key()?);
/// # Ok::<(), itsme::Error>(())
/// ```
pub struct DeterministicRandom {
    raw: NonNull<sys::itsme_random>,
}

// SAFETY: an itsme_random must not be used by two calls at once.  This type
// hands its handle to the library only through `&mut self` (see `raw_rng`),
// so calls never overlap, and the handle is tied to no thread.
unsafe impl Send for DeterministicRandom {}
// SAFETY: a shared reference gives no access to the handle.
unsafe impl Sync for DeterministicRandom {}

impl DeterministicRandom {
    /// A deterministic stream under a 32-byte seed (libsodium's
    /// `randombytes_buf_deterministic`, the seed replaced by its SHA-256
    /// after each draw).
    pub fn new(seed: &[u8; 32]) -> Result<DeterministicRandom> {
        init()?;
        test_build("itsme_random_new_deterministic")?;
        let mut out = ptr::null_mut();
        // SAFETY: the seed is valid for 32 bytes; out is a valid place.
        let code = unsafe { sys::itsme_random_new_deterministic(seed.as_ptr(), seed.len(), &mut out) };
        if code != sys::ITSME_OK {
            return Err(Error::new(code, thread_detail()));
        }
        NonNull::new(out)
            .map(|raw| DeterministicRandom { raw })
            .ok_or_else(|| Error::internal("itsme_random_new_deterministic succeeded without a handle"))
    }
}

impl Drop for DeterministicRandom {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_random_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for DeterministicRandom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeterministicRandom").field("raw", &self.raw).finish()
    }
}

/// The raw random source to pass: NULL for the operating system's.  The
/// `&mut` borrow keeps the source exclusive for the call.
pub(crate) fn raw_rng(rng: Option<&mut DeterministicRandom>) -> *mut sys::itsme_random {
    rng.map_or(ptr::null_mut(), |rng| rng.raw.as_ptr())
}

impl Identity {
    /// [`Identity::create`] drawing the identity's keys from `rng` (`None`:
    /// the operating system, exactly like [`Identity::create`]).  For tests
    /// and test vectors.
    ///
    /// Errors: as [`Identity::create`].
    pub fn create_with_random(
        store: &SecretStore,
        name: &str,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<Identity> {
        init()?;
        test_build("itsme_identity_create_with_random")?;
        let name = CText::arg(name, "the name")?;
        let rng = raw_rng(rng);
        store.open_identity(
            // SAFETY: live store handle, NUL-terminated name, a live random
            // source borrowed exclusively (or NULL), valid out.
            |raw, out| unsafe { sys::itsme_identity_create_with_random(raw, name.as_ptr(), rng, out) },
            "itsme_identity_create_with_random",
        )
    }
}

// ---------------------------------------------------------------------------
// Short codes
// ---------------------------------------------------------------------------

/// Parses a typed short code ("ECHO 0042"): surrounding spaces ignored,
/// the word in any case, one space or `-`, exactly four digits.  Returns
/// its value, below [`SHORT_CODE_VALUES`].
///
/// Errors: [`ErrorKind::InvalidArgument`] if it is not a short code.
///
/// ```
/// assert_eq!(itsme::short_code_parse(" echo-0042 ")?, 40042);
/// assert_eq!(itsme::short_code_format(40042)?, "ECHO 0042");
/// # Ok::<(), itsme::Error>(())
/// ```
pub fn short_code_parse(text: &str) -> Result<u32> {
    init()?;
    let text = CText::arg(text, "the short code")?;
    let mut value = 0u32;
    // SAFETY: NUL-terminated text; value is a valid place.
    match unsafe { sys::itsme_short_code_parse(text.as_ptr(), &mut value) } {
        sys::ITSME_OK => Ok(value),
        code => Err(Error::new(code, thread_detail())),
    }
}

/// The canonical text of a short code value ("ECHO 0042").
///
/// Errors: [`ErrorKind::InvalidArgument`] for a value not below
/// [`SHORT_CODE_VALUES`].
pub fn short_code_format(value: u32) -> Result<String> {
    init()?;
    read_string(sys::ITSME_SHORT_CODE_SIZE, |out, cap, len| {
        // SAFETY: out/len come from read_string.
        unsafe { sys::itsme_short_code_format(value, out, cap, len) }
    })
    .map_err(|failure| failure.into_error(thread_detail))
}

// ---------------------------------------------------------------------------
// Remote codes
// ---------------------------------------------------------------------------

/// Checks an invite or encryption code a person typed (either case; spaces
/// and `-` ignored) and returns it as shown: 8 characters in two groups,
/// "ABCD-EFGH".  A code carries a check character: every single wrong
/// character and every swap of two is caught here, before any network
/// call.
///
/// Errors: [`ErrorKind::InvalidArgument`] (the detail says what is wrong).
///
/// ```
/// assert_eq!(itsme::check_remote_code(" k7x2 m9pm ")?, "K7X2-M9PM");
/// // One character wrong, two swapped, a look-alike the codes never use:
/// for typo in ["K7X2-M9PN", "K7X2-9MPM", "K7X2-M9P0"] {
///     assert_eq!(itsme::check_remote_code(typo).unwrap_err().kind(), itsme::ErrorKind::InvalidArgument);
/// }
/// # Ok::<(), itsme::Error>(())
/// ```
pub fn check_remote_code(text: &str) -> Result<String> {
    init()?;
    let text = SecretText::arg(text, "the code")?;
    read_string(sys::ITSME_REMOTE_CODE_SIZE, |out, cap, len| {
        // SAFETY: NUL-terminated text; out/len come from read_string.
        unsafe { sys::itsme_remote_code_check(text.as_ptr(), out, cap, len) }
    })
    .map_err(|failure| failure.into_error(thread_detail))
}

// ---------------------------------------------------------------------------
// Exchange states and flags
// ---------------------------------------------------------------------------

/// The state of an [`Exchange`] (`itsme_exchange_state`).
///
/// Converts to and from the C value: `u32::from(state)` and
/// `ExchangeState::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExchangeState {
    /// Waiting for the peer's payload (QR) or next frame (Bluetooth)
    /// (`ITSME_EXCHANGE_AWAITING_PEER`).
    AwaitingPeer,
    /// The SAS is ready: show it for the two people to compare
    /// (`ITSME_EXCHANGE_COMPARE_SAS`).
    CompareSas,
    /// A source-format (v5) QR payload was read: it has no SAS and nothing
    /// in it is authenticated; it can be saved, not confirmed
    /// (`ITSME_EXCHANGE_IMPORTED`).
    Imported,
    /// Both decisions are in: the contact is verified
    /// (`ITSME_EXCHANGE_CONFIRMED`).
    Confirmed,
    /// This side or the peer rejected the SAS, or this side stopped waiting
    /// (`ITSME_EXCHANGE_REJECTED`).
    Rejected,
    /// A peer message was rejected, or the exchange expired; every later
    /// call fails (`ITSME_EXCHANGE_FAILED`).
    Failed,
    /// This side confirmed; the peer's decision is not settled yet: wait for
    /// [`ExchangeFlags::PEER_CONFIRMED`] or [`ExchangeFlags::PEER_REJECTED`],
    /// then [`Exchange::settle`] (`ITSME_EXCHANGE_AWAITING_DECISION`).
    AwaitingDecision,
}

impl ExchangeState {
    /// The C value of this state.
    pub fn code(self) -> sys::itsme_exchange_state {
        match self {
            ExchangeState::AwaitingPeer => sys::ITSME_EXCHANGE_AWAITING_PEER,
            ExchangeState::CompareSas => sys::ITSME_EXCHANGE_COMPARE_SAS,
            ExchangeState::Imported => sys::ITSME_EXCHANGE_IMPORTED,
            ExchangeState::Confirmed => sys::ITSME_EXCHANGE_CONFIRMED,
            ExchangeState::Rejected => sys::ITSME_EXCHANGE_REJECTED,
            ExchangeState::Failed => sys::ITSME_EXCHANGE_FAILED,
            ExchangeState::AwaitingDecision => sys::ITSME_EXCHANGE_AWAITING_DECISION,
        }
    }

    /// The state of a C value, or `None` for one this binding does not know.
    pub fn from_code(code: sys::itsme_exchange_state) -> Option<Self> {
        match code {
            sys::ITSME_EXCHANGE_AWAITING_PEER => Some(ExchangeState::AwaitingPeer),
            sys::ITSME_EXCHANGE_COMPARE_SAS => Some(ExchangeState::CompareSas),
            sys::ITSME_EXCHANGE_IMPORTED => Some(ExchangeState::Imported),
            sys::ITSME_EXCHANGE_CONFIRMED => Some(ExchangeState::Confirmed),
            sys::ITSME_EXCHANGE_REJECTED => Some(ExchangeState::Rejected),
            sys::ITSME_EXCHANGE_FAILED => Some(ExchangeState::Failed),
            sys::ITSME_EXCHANGE_AWAITING_DECISION => Some(ExchangeState::AwaitingDecision),
            _ => None,
        }
    }
}

impl From<ExchangeState> for u32 {
    fn from(state: ExchangeState) -> u32 {
        state.code()
    }
}

impl TryFrom<u32> for ExchangeState {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        ExchangeState::from_code(code).ok_or_else(|| {
            Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown exchange state {code}"))
        })
    }
}

/// The flags (events) of an [`Exchange`] (`ITSME_EXCHANGE_FLAG_*`), a set
/// of bits.  Bits this binding does not know are kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExchangeFlags(u32);

impl ExchangeFlags {
    /// The peer sent the source format: its name cannot be verified
    /// (`ITSME_EXCHANGE_FLAG_UNAUTHENTICATED`).
    pub const UNAUTHENTICATED: ExchangeFlags = ExchangeFlags(sys::ITSME_EXCHANGE_FLAG_UNAUTHENTICATED);
    /// A contact with the peer's identity key is stored; set by
    /// [`Exchange::save`] (`ITSME_EXCHANGE_FLAG_KNOWN_CONTACT`).
    pub const KNOWN_CONTACT: ExchangeFlags = ExchangeFlags(sys::ITSME_EXCHANGE_FLAG_KNOWN_CONTACT);
    /// The peer's authenticated confirmation of the SAS arrived (Bluetooth,
    /// invite, real-time) (`ITSME_EXCHANGE_FLAG_PEER_CONFIRMED`).
    pub const PEER_CONFIRMED: ExchangeFlags = ExchangeFlags(sys::ITSME_EXCHANGE_FLAG_PEER_CONFIRMED);
    /// The peer rejected the SAS (`ITSME_EXCHANGE_FLAG_PEER_REJECTED`):
    /// confirm is refused; [`Exchange::settle`] (after this side confirmed)
    /// or [`Exchange::reject`] deletes the new contact.
    pub const PEER_REJECTED: ExchangeFlags = ExchangeFlags(sys::ITSME_EXCHANGE_FLAG_PEER_REJECTED);

    const NAMES: [(ExchangeFlags, &'static str); 4] = [
        (ExchangeFlags::UNAUTHENTICATED, "UNAUTHENTICATED"),
        (ExchangeFlags::KNOWN_CONTACT, "KNOWN_CONTACT"),
        (ExchangeFlags::PEER_CONFIRMED, "PEER_CONFIRMED"),
        (ExchangeFlags::PEER_REJECTED, "PEER_REJECTED"),
    ];

    /// No flag.
    pub const fn empty() -> ExchangeFlags {
        ExchangeFlags(0)
    }

    /// The flags of a C value, unknown bits included.
    pub const fn from_bits(bits: u32) -> ExchangeFlags {
        ExchangeFlags(bits)
    }

    /// The C value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: ExchangeFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for ExchangeFlags {
    type Output = ExchangeFlags;

    fn bitor(self, other: ExchangeFlags) -> ExchangeFlags {
        ExchangeFlags(self.0 | other.0)
    }
}

impl std::ops::BitAnd for ExchangeFlags {
    type Output = ExchangeFlags;

    fn bitand(self, other: ExchangeFlags) -> ExchangeFlags {
        ExchangeFlags(self.0 & other.0)
    }
}

impl fmt::Debug for ExchangeFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<String> = Vec::new();
        let mut rest = self.0;
        for (flag, name) in ExchangeFlags::NAMES {
            if self.contains(flag) {
                names.push(name.to_owned());
                rest &= !flag.0;
            }
        }
        if rest != 0 {
            names.push(format!("{rest:#x}"));
        }
        if names.is_empty() {
            names.push("empty".to_owned());
        }
        write!(f, "ExchangeFlags({})", names.join(" | "))
    }
}

// ---------------------------------------------------------------------------
// Exchange
// ---------------------------------------------------------------------------

/// A contact exchange (`itsme_exchange`): in person, by QR codes or
/// Bluetooth, or at a distance, through a relay (an invite or a real-time
/// exchange): a state machine whose bytes the host moves.
///
/// The usual flow: [`Exchange::qr`], [`Exchange::bluetooth`],
/// [`Exchange::invite`] or [`Exchange::accept_invite`]; then send
/// what [`Exchange::next_outgoing`] gives and pass the peer's bytes to
/// [`Exchange::receive`], until the state is
/// [`ExchangeState::CompareSas`]; show [`Exchange::sas`] and the peer's
/// name, and [`Exchange::save`] the contact unverified; the two people
/// compare the SAS aloud, then [`Exchange::confirm`] (contact verified) or
/// [`Exchange::reject`] (contact deleted).  Bluetooth: send the CONFIRM
/// frame `next_outgoing` then gives.
///
/// At a distance the messages go through the relay: the inviter's INVITE
/// (queued at creation), the invitee's ACCEPT (after the INVITE), the
/// inviter's REPLY (after the ACCEPT).  The inviter's SAS is ready on the
/// ACCEPT, the invitee's on the REPLY; the two people compare it on a call.
///
/// A failure is final: once `receive` has rejected a peer message (any
/// error but [`ErrorKind::InvalidArgument`] for a scanned text that is not
/// an exchange payload, and [`ErrorKind::InvalidState`] for a call in the
/// wrong order), the state is [`ExchangeState::Failed`] and every later
/// call fails.  A pending exchange expires 24 hours after it began.
///
/// The library keeps the exchange's identity and contact store alive, so
/// the [`Identity`] and [`ContactStore`] it was made with may be dropped
/// first.  An exchange may be shared between
/// threads (`Send + Sync`): its calls are serialised.  Dropping it wipes
/// its secrets.  Errors carry the exchange's last-error detail (for the
/// constructors, the identity's).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("itsme-doc-exchange-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// use itsme::{ContactStore, Exchange, ExchangeState, Identity, SecretStore};
/// let now = 1_800_000_000;
/// let alice = Identity::create(&SecretStore::memory()?, "Alice")?;
/// let bob = Identity::create(&SecretStore::memory()?, "Bob")?;
/// let contacts = ContactStore::open(&alice, dir.join("alice.db"))?;
/// let bob_contacts = ContactStore::open(&bob, dir.join("bob.db"))?;
/// let mut a = Exchange::qr(&alice, &contacts, now, None)?;
/// let mut b = Exchange::qr(&bob, &bob_contacts, now, None)?;
/// // Each device shows its QR code and scans the other's.
/// let (shown_by_a, shown_by_b) = (a.next_outgoing()?, b.next_outgoing()?);
/// a.receive(&shown_by_b, now)?;
/// b.receive(&shown_by_a, now)?;
/// assert_eq!(a.status()?.0, ExchangeState::CompareSas);
/// assert_eq!(a.sas()?, b.sas()?);
/// assert_eq!(a.peer_name()?, "Bob");
/// // The two people compared the SAS aloud and it matched.
/// let id = a.confirm(now + 30)?;
/// assert_eq!(contacts.get(id)?.name, "Bob");
/// # drop((a, b, contacts, bob_contacts));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), itsme::Error>(())
/// ```
pub struct Exchange {
    raw: NonNull<sys::itsme_exchange>,
    /// Pairs each call with the last-error detail it left, and keeps two
    /// threads from using the handle at once.
    lock: Mutex<()>,
}

// SAFETY: the header forbids using an itsme_exchange from two threads at
// once, and every call this type makes on its handle is serialised by
// `lock`; the handle is tied to no thread.  The library keeps the
// exchange's identity alive and takes the identity's lock during each
// call, so other threads may go on using the identity.
unsafe impl Send for Exchange {}
// SAFETY: see above.
unsafe impl Sync for Exchange {}

impl Exchange {
    /// Starts a QR exchange for `identity` at `now` (unix seconds), drawing
    /// its ephemeral key and device secret from `rng` (`None`: the
    /// operating system).  Show [`Exchange::next_outgoing`] as a QR code
    /// and pass the text scanned from the peer's to [`Exchange::receive`].
    /// The exchange saves the new contact in `store`, a contact store of
    /// `identity`; it keeps both alive (the library holds counted
    /// references), so neither needs to outlive this value.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a negative `now`),
    /// [`ErrorKind::WrongIdentity`] (a store of another identity).
    pub fn qr(
        identity: &Identity,
        store: &ContactStore,
        now: i64,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<Exchange> {
        init()?;
        let rng = raw_rng(rng);
        let contacts = store.as_raw();
        let mut out = ptr::null_mut();
        // SAFETY: live identity and store handles; a live random source
        // borrowed exclusively (or NULL); out is a valid place.
        identity.call_code(|raw| unsafe { sys::itsme_exchange_new_qr(raw, contacts, rng, now, &mut out) })?;
        Exchange::constructed(out, "itsme_exchange_new_qr")
    }

    /// Starts a Bluetooth exchange for `identity` at `now`.
    /// `session_code` is the code the other device shows (parsed like
    /// [`short_code_parse`]), or `None` to draw one for this device to
    /// show ([`Exchange::session_code`]).  Random bytes come from `rng`
    /// (`None`: the operating system); `store` as for [`Exchange::qr`].
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a session code that does
    /// not parse, a negative `now`), [`ErrorKind::WrongIdentity`].
    pub fn bluetooth(
        identity: &Identity,
        store: &ContactStore,
        session_code: Option<&str>,
        now: i64,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<Exchange> {
        init()?;
        let code = session_code.map(|code| CText::arg(code, "the session code")).transpose()?;
        let code_ptr = code.as_ref().map_or(ptr::null(), CText::as_ptr);
        let rng = raw_rng(rng);
        let contacts = store.as_raw();
        let mut out = ptr::null_mut();
        // SAFETY: live identity and store handles; NUL-terminated code or
        // NULL; a live random source borrowed exclusively (or NULL); out is
        // a valid place.
        identity.call_code(|raw| unsafe {
            sys::itsme_exchange_new_bluetooth(raw, contacts, code_ptr, rng, now, &mut out)
        })?;
        Exchange::constructed(out, "itsme_exchange_new_bluetooth")
    }

    /// Starts an exchange at a distance as the inviter, for `identity` at
    /// `now`: draws the invite code, the encryption code and the keys from
    /// `rng` (`None`: the operating system), and queues the INVITE for
    /// [`Exchange::next_outgoing`].  Show [`Exchange::invite_code`] and
    /// [`Exchange::encryption_code`] to the person, who passes them to the
    /// other by any channel.  `realtime`: carried in a relay room while
    /// both people are on a call ([`ExchangeMethod::Realtime`]); otherwise
    /// through the invite mailbox ([`ExchangeMethod::Invite`]).  The relay
    /// ID is [`Exchange::relay_id`].  `store` as for [`Exchange::qr`].
    ///
    /// The exchange's PAKE secret is kept in the identity's secret store
    /// (never in a sealed exchange) until the exchange ends.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a negative `now`),
    /// [`ErrorKind::WrongIdentity`], [`ErrorKind::SecretStore`].
    ///
    /// ```
    /// use itsme::{ContactStore, Exchange, ExchangeState, Identity, SecretStore};
    /// let now = 1_800_000_000;
    /// let dir = std::env::temp_dir().join(format!("itsme-doc-invite-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let alice = Identity::create(&SecretStore::memory()?, "Alice")?;
    /// let bob = Identity::create(&SecretStore::memory()?, "Bob")?;
    /// let alice_contacts = ContactStore::open(&alice, dir.join("alice.db"))?;
    /// let bob_contacts = ContactStore::open(&bob, dir.join("bob.db"))?;
    /// let mut a = Exchange::invite(&alice, &alice_contacts, false, now, None)?;
    /// // Alice gives Bob the two codes; Bob types them.
    /// let mut b = Exchange::accept_invite(&bob, &bob_contacts, &a.invite_code()?, &a.encryption_code()?, false, now, None)?;
    /// assert_eq!(a.relay_id()?, b.relay_id()?);
    /// // Each message goes through the relay's mailbox at that ID.
    /// b.receive(&a.next_outgoing()?, now)?; // INVITE
    /// a.receive(&b.next_outgoing()?, now)?; // ACCEPT
    /// b.receive(&a.next_outgoing()?, now)?; // REPLY
    /// assert_eq!(b.status()?.0, ExchangeState::CompareSas);
    /// assert_eq!(a.sas()?, b.sas()?);
    /// # drop((a, b, alice_contacts, bob_contacts));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), itsme::Error>(())
    /// ```
    pub fn invite(
        identity: &Identity,
        store: &ContactStore,
        realtime: bool,
        now: i64,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<Exchange> {
        init()?;
        let rng = raw_rng(rng);
        let contacts = store.as_raw();
        let mut out = ptr::null_mut();
        // SAFETY: live identity and store handles; a live random source
        // borrowed exclusively (or NULL); out is a valid place.
        identity.call_code(|raw| unsafe {
            sys::itsme_exchange_new_invite(raw, contacts, realtime, rng, now, &mut out)
        })?;
        Exchange::constructed(out, "itsme_exchange_new_invite")
    }

    /// Joins an exchange at a distance as the invitee, for `identity` at
    /// `now`, with the two codes the inviter shared (typed in either case;
    /// spaces and `-` ignored).  `realtime` as for [`Exchange::invite`]: the
    /// two sides must agree.  Random bytes come from `rng` (`None`: the
    /// operating system); `store` as for [`Exchange::qr`].  Nothing is sent
    /// until the inviter's INVITE has been passed to [`Exchange::receive`].
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a code with a typo, a
    /// character codes never use, the same code twice, a negative `now`;
    /// nothing is stored), [`ErrorKind::WrongIdentity`],
    /// [`ErrorKind::SecretStore`].
    pub fn accept_invite(
        identity: &Identity,
        store: &ContactStore,
        invite_code: &str,
        encryption_code: &str,
        realtime: bool,
        now: i64,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<Exchange> {
        init()?;
        let invite_code = CText::arg(invite_code, "the invite code")?;
        let encryption_code = SecretText::arg(encryption_code, "the encryption code")?;
        let rng = raw_rng(rng);
        let contacts = store.as_raw();
        let mut out = ptr::null_mut();
        // SAFETY: live identity and store handles; NUL-terminated codes; a
        // live random source borrowed exclusively (or NULL); out is a valid
        // place.
        identity.call_code(|raw| unsafe {
            sys::itsme_exchange_accept_invite(
                raw,
                contacts,
                invite_code.as_ptr(),
                encryption_code.as_ptr(),
                realtime,
                rng,
                now,
                &mut out,
            )
        })?;
        Exchange::constructed(out, "itsme_exchange_accept_invite")
    }

    /// Restores an exchange sealed with [`Exchange::seal`] on this device,
    /// for `identity`, at `now`, saving to `store` as at creation: once the
    /// exchange had saved its contact, the store it saved in (any handle
    /// on that file).  Restore a sealed exchange at most once.
    ///
    /// An invite or real-time exchange restores only while its PAKE secret
    /// is in the identity's secret store: once the exchange has ended
    /// (confirmed, rejected, failed, expired), no sealed copy of it
    /// restores.
    ///
    /// Errors: [`ErrorKind::CorruptData`] (not a sealed exchange),
    /// [`ErrorKind::AuthenticationFailed`] (sealed on another device or for
    /// another identity, or altered), [`ErrorKind::Expired`] (begun more
    /// than 24 hours before `now`), [`ErrorKind::InvalidState`] (an invite
    /// or real-time exchange that has ended), [`ErrorKind::WrongIdentity`],
    /// [`ErrorKind::InvalidArgument`] (a store other than the one the
    /// contact was saved in).
    pub fn restore(identity: &Identity, store: &ContactStore, sealed: &[u8], now: i64) -> Result<Exchange> {
        init()?;
        let contacts = store.as_raw();
        let mut out = ptr::null_mut();
        // SAFETY: live identity and store handles; sealed is valid for its
        // length; out is a valid place.
        identity.call_code(|raw| unsafe {
            sys::itsme_exchange_restore(raw, contacts, sealed.as_ptr(), sealed.len(), now, &mut out)
        })?;
        Exchange::constructed(out, "itsme_exchange_restore")
    }

    fn constructed(out: *mut sys::itsme_exchange, function: &str) -> Result<Exchange> {
        NonNull::new(out)
            .map(|raw| Exchange { raw, lock: Mutex::new(()) })
            .ok_or_else(|| Error::internal(format!("{function} succeeded without a handle")))
    }

    /// Runs a call on the handle and adds the handle's last-error detail to
    /// a failure.
    pub(crate) fn call<T>(
        &self,
        body: impl FnOnce(*mut sys::itsme_exchange) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        locked_call(&self.lock, self.raw.as_ptr(), body)
    }

    /// Runs a call that only returns a result code.
    fn call_code(&self, body: impl FnOnce(*mut sys::itsme_exchange) -> i32) -> Result<()> {
        self.call(|raw| code_result(body(raw)))
    }

    /// The state and the flags.
    pub fn status(&self) -> Result<(ExchangeState, ExchangeFlags)> {
        let mut state: sys::itsme_exchange_state = 0;
        let mut flags = 0u32;
        // SAFETY: live handle; both outputs are valid places.
        self.call_code(|raw| unsafe { sys::itsme_exchange_status(raw, &mut state, &mut flags) })?;
        let state = ExchangeState::from_code(state).ok_or_else(|| {
            Error::internal(format!("libitsme returned exchange state {state}, unknown to this binding"))
        })?;
        Ok((state, ExchangeFlags::from_bits(flags)))
    }

    /// How the exchange was started: [`ExchangeMethod::Qr`],
    /// [`ExchangeMethod::Bluetooth`], [`ExchangeMethod::Invite`] or
    /// [`ExchangeMethod::Realtime`] (useful after [`Exchange::restore`]).
    pub fn method(&self) -> Result<ExchangeMethod> {
        let mut method: sys::itsme_exchange_method = u32::MAX;
        // SAFETY: live handle; the output is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_exchange_get_method(raw, &mut method) })?;
        ExchangeMethod::from_code(method)
            .ok_or_else(|| Error::internal(format!("libitsme returned exchange method {method}, unknown to this binding")))
    }

    /// Bluetooth: the session code text this device shows or was given
    /// ("ECHO 0042").
    ///
    /// Errors: [`ErrorKind::InvalidState`] for a QR exchange.
    pub fn session_code(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_SHORT_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_session_code(raw, out, cap, len) }
            })
        })
    }

    /// Invite and real-time: the invite code as shown ("ABCD-EFGH").  Not
    /// secret from the relay.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (an exchange in person).
    pub fn invite_code(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_REMOTE_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_invite_code(raw, out, cap, len) }
            })
        })
    }

    /// Invite and real-time: the encryption code as shown ("ABCD-EFGH").
    /// It is the password of the exchange: show it to the person, never log
    /// it.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (an exchange in person).
    pub fn encryption_code(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_REMOTE_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_encryption_code(raw, out, cap, len) }
            })
        })
    }

    /// Invite and real-time: the relay ID to use, 32 lower-case hexadecimal
    /// digits: the invite mailbox or, for a real-time exchange, the room.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (an exchange in person).
    pub fn relay_id(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_RELAY_ID_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_relay_id(raw, out, cap, len) }
            })
        })
    }

    /// Invite and real-time: whether this side created the invite.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (an exchange in person).
    pub fn is_inviter(&self) -> Result<bool> {
        let mut inviter = false;
        // SAFETY: live handle; the output is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_exchange_is_inviter(raw, &mut inviter) })?;
        Ok(inviter)
    }

    /// The next bytes to send; empty when there is nothing to send.
    ///
    /// QR: the payload text (ASCII), to show as a QR code for as long as
    /// the exchange is awaiting the peer or comparing the SAS; it is not
    /// consumed.  Bluetooth: the next frame, removed from the queue.
    /// Invite and real-time: the next message to post to the relay, removed
    /// from the queue.
    pub fn next_outgoing(&mut self) -> Result<Vec<u8>> {
        self.call(|raw| {
            read_bytes(QR_PAYLOAD_MAX.max(BLUETOOTH_FRAME_MAX).max(REMOTE_MESSAGE_MAX), |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_next_outgoing(raw, out, cap, len) }
            })
        })
    }

    /// Feeds the peer's bytes at `now`: the scanned QR text, one
    /// Bluetooth frame, or one message fetched from the relay.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (for QR, a text that is not
    /// an exchange payload: scan again, the exchange goes on),
    /// [`ErrorKind::InvalidState`] (the exchange failed or finished; for
    /// QR, a payload was received already), and, ending the exchange as
    /// failed: [`ErrorKind::MalformedMessage`],
    /// [`ErrorKind::AuthenticationFailed`] (bad signature, fingerprint,
    /// commitment or frame tag; at a distance, a wrong encryption code or
    /// a relay that changed the messages), [`ErrorKind::InvalidKey`] (our
    /// own key, a low-order ephemeral key), [`ErrorKind::Expired`].
    pub fn receive(&mut self, bytes: &[u8], now: i64) -> Result<()> {
        // SAFETY: live handle; bytes valid for their length.
        self.call_code(|raw| unsafe { sys::itsme_exchange_receive(raw, bytes.as_ptr(), bytes.len(), now) })
    }

    /// The SAS text to compare ("ECHO 0042").
    ///
    /// Errors: [`ErrorKind::InvalidState`] (no SAS yet, a source-format
    /// import, or the exchange failed).
    pub fn sas(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_SHORT_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_sas(raw, out, cap, len) }
            })
        })
    }

    /// The peer's name, as the peer sent it (for a source-format peer,
    /// unauthenticated).
    ///
    /// Errors: [`ErrorKind::InvalidState`] (nothing received yet, or the
    /// exchange failed).
    pub fn peer_name(&self) -> Result<String> {
        self.call(|raw| {
            read_string(NAME_MAX_BYTES + 1, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_peer_name(raw, out, cap, len) }
            })
        })
    }

    /// The peer's fingerprint: 16 uppercase hexadecimal digits.
    ///
    /// Errors: as [`Exchange::peer_name`].
    pub fn peer_fingerprint(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_FINGERPRINT_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_peer_fingerprint(raw, out, cap, len) }
            })
        })
    }

    /// The peer's identity public key; `None` for a source-format peer,
    /// which has none.
    ///
    /// Errors: as [`Exchange::peer_name`].
    pub fn peer_public_key(&self) -> Result<Option<[u8; PUBLIC_KEY_BYTES]>> {
        let bytes = self.call(|raw| {
            let result = read_bytes(PUBLIC_KEY_BYTES, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_peer_public_key(raw, out, cap, len) }
            });
            match result {
                Ok(bytes) => Ok(Some(bytes)),
                Err(Failure::Code(sys::ITSME_E_NOT_FOUND)) => Ok(None),
                Err(failure) => Err(failure),
            }
        })?;
        bytes
            .map(|bytes| {
                <[u8; PUBLIC_KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
                    Error::internal(format!("libitsme returned a public key of {} bytes", bytes.len()))
                })
            })
            .transpose()
    }

    /// Stores the new contact in the exchange's store unverified, with its
    /// seed and both device secrets, at `now`, and returns its id.  If a
    /// contact with the peer's identity key exists, stores nothing, sets
    /// [`ExchangeFlags::KNOWN_CONTACT`] and returns that contact's id.
    /// Calling it again returns the same id.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (state not
    /// [`ExchangeState::CompareSas`] or [`ExchangeState::Imported`]),
    /// [`ErrorKind::Expired`], [`ErrorKind::Database`].
    pub fn save(&mut self, now: i64) -> Result<i64> {
        let mut id = 0i64;
        // SAFETY: live handle; id is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_exchange_save(raw, now, &mut id) })?;
        Ok(id)
    }

    /// The person said the SAS matches: saves if needed, queues this side's
    /// decision for [`Exchange::next_outgoing`] and returns the contact's
    /// id.  A contact becomes verified only with both decisions
    /// (docs/PROTOCOL.md 8.1): for QR, or once the peer's confirmation has
    /// arrived, at once (state [`ExchangeState::Confirmed`]; a known
    /// contact gets the new seed and device secrets); otherwise the state
    /// becomes [`ExchangeState::AwaitingDecision`], a new contact
    /// [`VerificationState::AwaitingPeer`](crate::VerificationState::AwaitingPeer),
    /// until [`Exchange::settle`].
    ///
    /// Errors: [`ErrorKind::InvalidState`] (no SAS, an import, or the peer
    /// rejected), [`ErrorKind::NotFound`] (the contact saved was deleted
    /// since: nothing changes, [`Exchange::reject`] still ends the
    /// exchange), [`ErrorKind::Expired`], [`ErrorKind::Database`].
    pub fn confirm(&mut self, now: i64) -> Result<i64> {
        let mut id = 0i64;
        // SAFETY: live handle; id is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_exchange_confirm(raw, now, &mut id) })?;
        Ok(id)
    }

    /// Applies the peer's decision, once it arrived, to a confirmed exchange
    /// ([`ExchangeState::AwaitingDecision`]): the peer confirmed, the
    /// contact becomes verified and `Some(id)` is returned; the peer
    /// rejected, a new contact is deleted (a known one keeps its old seed;
    /// one already deleted counts as deleted) and `None` is returned.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (the peer's decision has not
    /// arrived), [`ErrorKind::NotFound`] (a confirmation, and the contact
    /// was deleted since: nothing changes, [`Exchange::reject`] ends the
    /// exchange), [`ErrorKind::Expired`], [`ErrorKind::Database`].
    pub fn settle(&mut self, now: i64) -> Result<Option<i64>> {
        let mut id = 0i64;
        // SAFETY: live handle; id is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_exchange_settle(raw, now, &mut id) })?;
        Ok(if id != 0 { Some(id) } else { None })
    }

    /// The SAS differs, the person gave up, or (while awaiting the peer's
    /// decision) the room or Bluetooth session ended first: deletes the contact
    /// [`Exchange::save`] added (a known contact is left untouched); the
    /// state becomes [`ExchangeState::Rejected`].  Bluetooth: a CONFIRM
    /// frame saying so is queued once the peer's data has been received.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (already finished, or failed with
    /// nothing to delete), [`ErrorKind::Database`].
    pub fn reject(&mut self) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_exchange_reject(raw) })
    }

    /// Seals a pending exchange (awaiting the peer, comparing the SAS or
    /// imported) to bytes, encrypted and authenticated under a key derived
    /// from this device's device key, so it can be restored later with
    /// [`Exchange::restore`] on this device.  The exchange stays usable.
    ///
    /// Errors: [`ErrorKind::InvalidState`], [`ErrorKind::SecretStore`].
    pub fn seal(&self) -> Result<Vec<u8>> {
        self.call(|raw| {
            read_bytes(1024, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_exchange_seal(raw, out, cap, len) }
            })
        })
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_exchange_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange").field("raw", &self.raw).finish()
    }
}

// ---------------------------------------------------------------------------
// Pure derivations
// ---------------------------------------------------------------------------

/// Runs a pure derivation that writes exactly `N` bytes; a failure carries
/// the thread's last-error detail.  The intermediate buffer is wiped.
fn derived<const N: usize>(
    function: &str,
    call: impl FnMut(*mut u8, usize, *mut usize) -> i32,
) -> Result<[u8; N]> {
    init()?;
    test_build(function)?;
    let mut bytes = read_bytes(N, call).map_err(|failure| failure.into_error(thread_detail))?;
    let array = <[u8; N]>::try_from(bytes.as_slice());
    wipe(&mut bytes);
    array.map_err(|_| Error::internal(format!("{function} wrote {} bytes, not {N}", bytes.len())))
}

/// The verification seed (PROTOCOL.md section 3): HKDF over
/// X25519(`ephemeral_secret`, `peer_ephemeral_public`), salted with the two
/// fingerprints (16 hexadecimal digits each, in either order).
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes, a bad fingerprint),
/// [`ErrorKind::InvalidKey`] (an all-zero shared secret).
pub fn derive_seed(
    ephemeral_secret: &[u8],
    peer_ephemeral_public: &[u8],
    fingerprint_a: &str,
    fingerprint_b: &str,
) -> Result<[u8; SEED_BYTES]> {
    let a = CText::arg(fingerprint_a, "fingerprint_a")?;
    let b = CText::arg(fingerprint_b, "fingerprint_b")?;
    derived("itsme_derive_seed", |out, cap, len| {
        // SAFETY: slices valid for their lengths; NUL-terminated texts;
        // out/len come from read_bytes.
        unsafe {
            sys::itsme_derive_seed(
                ephemeral_secret.as_ptr(),
                ephemeral_secret.len(),
                peer_ephemeral_public.as_ptr(),
                peer_ephemeral_public.len(),
                a.as_ptr(),
                b.as_ptr(),
                out,
                cap,
                len,
            )
        }
    })
}

/// The SAS text (PROTOCOL.md section 4.1) of a 32-byte seed and transcript
/// hash.
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes).
pub fn derive_sas(seed: &[u8], transcript_hash: &[u8]) -> Result<String> {
    init()?;
    test_build("itsme_derive_sas")?;
    read_string(sys::ITSME_SHORT_CODE_SIZE, |out, cap, len| {
        // SAFETY: slices valid for their lengths; out/len come from
        // read_string.
        unsafe {
            sys::itsme_derive_sas(seed.as_ptr(), seed.len(), transcript_hash.as_ptr(), transcript_hash.len(), out, cap, len)
        }
    })
    .map_err(|failure| failure.into_error(thread_detail))
}

/// The QR transcript hash (PROTOCOL.md section 5.3) of two payload texts
/// (`ITSME1:...`), in either order.  Each payload's signature is checked.
///
/// Errors: [`ErrorKind::InvalidArgument`] (not an `ITSME1:` text),
/// [`ErrorKind::MalformedMessage`], [`ErrorKind::AuthenticationFailed`].
pub fn qr_transcript_hash(payload_a: &[u8], payload_b: &[u8]) -> Result<[u8; 32]> {
    derived("itsme_qr_transcript_hash", |out, cap, len| {
        // SAFETY: slices valid for their lengths; out/len come from
        // read_bytes.
        unsafe {
            sys::itsme_qr_transcript_hash(payload_a.as_ptr(), payload_a.len(), payload_b.as_ptr(), payload_b.len(), out, cap, len)
        }
    })
}

/// The Bluetooth commitment (PROTOCOL.md section 7.3) to an identity key,
/// an ephemeral key, a name and a device secret.
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes, an invalid name).
pub fn bluetooth_commitment(
    identity_public: &[u8],
    ephemeral_public: &[u8],
    name: &str,
    device_secret: &[u8],
) -> Result<[u8; 32]> {
    let name = CText::arg(name, "the name")?;
    derived("itsme_bluetooth_commitment", |out, cap, len| {
        // SAFETY: slices valid for their lengths; NUL-terminated name;
        // out/len come from read_bytes.
        unsafe {
            sys::itsme_bluetooth_commitment(
                identity_public.as_ptr(),
                identity_public.len(),
                ephemeral_public.as_ptr(),
                ephemeral_public.len(),
                name.as_ptr(),
                device_secret.as_ptr(),
                device_secret.len(),
                out,
                cap,
                len,
            )
        }
    })
}

/// th1 (PROTOCOL.md section 7.3) from the session code text and the four
/// whole frames: the initiator's and responder's HELLO and KEY.
///
/// Errors: [`ErrorKind::InvalidArgument`] (a session code that does not
/// parse).
pub fn bluetooth_th1(session_code: &str, hello_i: &[u8], hello_r: &[u8], key_i: &[u8], key_r: &[u8]) -> Result<[u8; 32]> {
    let code = CText::arg(session_code, "the session code")?;
    derived("itsme_bluetooth_th1", |out, cap, len| {
        // SAFETY: NUL-terminated code; slices valid for their lengths;
        // out/len come from read_bytes.
        unsafe {
            sys::itsme_bluetooth_th1(
                code.as_ptr(),
                hello_i.as_ptr(),
                hello_i.len(),
                hello_r.as_ptr(),
                hello_r.len(),
                key_i.as_ptr(),
                key_i.len(),
                key_r.as_ptr(),
                key_r.len(),
                out,
                cap,
                len,
            )
        }
    })
}

/// The Bluetooth session keys (PROTOCOL.md section 7.3) from our ephemeral
/// secret, the peer's ephemeral public key and th1: `(key_I, key_R)`, the
/// initiator's and the responder's.
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes),
/// [`ErrorKind::InvalidKey`] (an all-zero shared secret).
pub fn bluetooth_session_keys(
    ephemeral_secret: &[u8],
    peer_ephemeral_public: &[u8],
    th1: &[u8],
) -> Result<([u8; 32], [u8; 32])> {
    let mut keys: [u8; 64] = derived("itsme_bluetooth_session_keys", |out, cap, len| {
        // SAFETY: slices valid for their lengths; out/len come from
        // read_bytes.
        unsafe {
            sys::itsme_bluetooth_session_keys(
                ephemeral_secret.as_ptr(),
                ephemeral_secret.len(),
                peer_ephemeral_public.as_ptr(),
                peer_ephemeral_public.len(),
                th1.as_ptr(),
                th1.len(),
                out,
                cap,
                len,
            )
        }
    })?;
    let mut initiator = [0u8; 32];
    let mut responder = [0u8; 32];
    initiator.copy_from_slice(&keys[..32]);
    responder.copy_from_slice(&keys[32..]);
    wipe(&mut keys);
    Ok((initiator, responder))
}

/// The Bluetooth transcript hash (PROTOCOL.md section 7.4) from th1 and
/// the two decrypted contact data plaintexts, the initiator's first.
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes).
pub fn bluetooth_transcript_hash(th1: &[u8], plaintext_i: &[u8], plaintext_r: &[u8]) -> Result<[u8; 32]> {
    derived("itsme_bluetooth_transcript_hash", |out, cap, len| {
        // SAFETY: slices valid for their lengths; out/len come from
        // read_bytes.
        unsafe {
            sys::itsme_bluetooth_transcript_hash(
                th1.as_ptr(),
                th1.len(),
                plaintext_i.as_ptr(),
                plaintext_i.len(),
                plaintext_r.as_ptr(),
                plaintext_r.len(),
                out,
                cap,
                len,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for code in sys::ITSME_EXCHANGE_AWAITING_PEER..=sys::ITSME_EXCHANGE_AWAITING_DECISION {
            let state = ExchangeState::from_code(code).unwrap();
            assert_eq!(state.code(), code);
            assert_eq!(ExchangeState::try_from(code).unwrap(), state);
        }
        assert_eq!(ExchangeState::from_code(0), None);
        assert_eq!(ExchangeState::try_from(8).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn flags() {
        let both = ExchangeFlags::UNAUTHENTICATED | ExchangeFlags::KNOWN_CONTACT;
        assert_eq!(both.bits(), 3);
        assert!(both.contains(ExchangeFlags::KNOWN_CONTACT));
        assert!(!both.contains(ExchangeFlags::PEER_CONFIRMED));
        assert!(ExchangeFlags::empty().is_empty());
        assert_eq!((both & ExchangeFlags::KNOWN_CONTACT), ExchangeFlags::KNOWN_CONTACT);
        assert_eq!(format!("{both:?}"), "ExchangeFlags(UNAUTHENTICATED | KNOWN_CONTACT)");
        assert_eq!(format!("{:?}", ExchangeFlags::from_bits(0x14)), "ExchangeFlags(PEER_CONFIRMED | 0x10)");
        assert_eq!(format!("{:?}", ExchangeFlags::default()), "ExchangeFlags(empty)");
    }
}
