//! Security PIN Update in person (`itsme_pin_update`), docs/PROTOCOL.md
//! section 10.3.

use super::*;

/// Longest PIN Update frame, in bytes.
pub const PIN_UPDATE_FRAME_MAX: usize = sys::ITSME_PIN_UPDATE_FRAME_MAX;

/// The state of a [`PinUpdate`] on this side (`itsme_pin_update_state`).
///
/// Converts to and from the C value: `u32::from(state)` and
/// `PinUpdateState::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PinUpdateState {
    /// Frames are still to be exchanged (`ITSME_PIN_UPDATE_RUNNING`).
    Running,
    /// This side has committed its new secret; the initiator may still
    /// have DONE to send: keep sending what [`PinUpdate::next_outgoing`]
    /// gives (`ITSME_PIN_UPDATE_DONE`).
    Done,
    /// A frame was refused, or the time ran out; every later call fails
    /// (`ITSME_PIN_UPDATE_FAILED`).
    Failed,
}

impl PinUpdateState {
    /// The C value of this state.
    pub fn code(self) -> sys::itsme_pin_update_state {
        match self {
            PinUpdateState::Running => sys::ITSME_PIN_UPDATE_RUNNING,
            PinUpdateState::Done => sys::ITSME_PIN_UPDATE_DONE,
            PinUpdateState::Failed => sys::ITSME_PIN_UPDATE_FAILED,
        }
    }

    /// The state of a C value, or `None` for one this binding does not know.
    pub fn from_code(code: sys::itsme_pin_update_state) -> Option<Self> {
        match code {
            sys::ITSME_PIN_UPDATE_RUNNING => Some(PinUpdateState::Running),
            sys::ITSME_PIN_UPDATE_DONE => Some(PinUpdateState::Done),
            sys::ITSME_PIN_UPDATE_FAILED => Some(PinUpdateState::Failed),
            _ => None,
        }
    }
}

impl From<PinUpdateState> for u32 {
    fn from(state: PinUpdateState) -> u32 {
        state.code()
    }
}

impl TryFrom<u32> for PinUpdateState {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        PinUpdateState::from_code(code)
            .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown PIN update state {code}")))
    }
}

/// One Security PIN Update with a stored contact (`itsme_pin_update`).
///
/// Two people together replace the device secrets of their contact; this
/// restores a degraded contact.  Both devices show
/// [`PinUpdate::session_code`], by which the host finds the peer over
/// Bluetooth (if none is found, it starts a second update for the window
/// before); the host sends every frame [`PinUpdate::next_outgoing`] gives
/// and passes every frame that arrives to [`PinUpdate::receive`], until
/// `next_outgoing` gives nothing and the state is [`PinUpdateState::Done`].
///
/// The update writes to the contact store as the protocol requires, so
/// stopping at any point leaves both sides able to verify.  A failure is
/// final: the state is [`PinUpdateState::Failed`] and later calls fail with
/// [`ErrorKind::InvalidState`].  An update expires 10 minutes after its
/// creation ([`ErrorKind::Expired`]).  Times are unix seconds.
///
/// The library keeps the update's contact store alive.  An update may be
/// shared between threads (`Send + Sync`): its calls are serialised.
/// Dropping it wipes its secrets.  Errors carry the update's last-error
/// detail (for [`PinUpdate::new`], the store's).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("itsme-doc-pin-update-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// use itsme::{ContactStore, Identity, PinUpdate, PinUpdateState, SecretStore};
/// let now = 1_800_000_000;
/// let alice = Identity::create(&SecretStore::memory()?, "Alice")?;
/// let bob = Identity::create(&SecretStore::memory()?, "Bob")?;
/// let at_alice = ContactStore::open(&alice, dir.join("a.db"))?;
/// let at_bob = ContactStore::open(&bob, dir.join("b.db"))?;
/// let seed = [7u8; 32]; // from their exchange
/// let bob_id = at_alice.add("Bob", &bob.public_key()?, &seed, itsme::ExchangeMethod::Qr, now)?;
/// let alice_id = at_bob.add("Alice", &alice.public_key()?, &seed, itsme::ExchangeMethod::Qr, now)?;
/// let mut a = PinUpdate::new(&at_alice, bob_id, None, now, None)?;
/// let mut b = PinUpdate::new(&at_bob, alice_id, None, now, None)?;
/// assert_eq!(a.session_code()?, b.session_code()?);
/// // Bluetooth moves the frames.
/// loop {
///     let (from_a, from_b) = (a.next_outgoing()?, b.next_outgoing()?);
///     if from_a.is_empty() && from_b.is_empty() {
///         break;
///     }
///     if !from_a.is_empty() { b.receive(&from_a, now)?; }
///     if !from_b.is_empty() { a.receive(&from_b, now)?; }
/// }
/// assert_eq!((a.state()?, b.state()?), (PinUpdateState::Done, PinUpdateState::Done));
/// # drop((at_alice, at_bob));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), itsme::Error>(())
/// ```
pub struct PinUpdate {
    raw: NonNull<sys::itsme_pin_update>,
    /// Pairs each call with the last-error detail it left, and keeps two
    /// threads from using the handle at once.
    lock: Mutex<()>,
    window: i64,
}

// SAFETY: the header forbids using an itsme_pin_update from two threads at
// once, and every call this type makes on its handle is serialised by
// `lock`; the handle is tied to no thread.  The library keeps the update's
// contact store alive.
unsafe impl Send for PinUpdate {}
// SAFETY: see above.
unsafe impl Sync for PinUpdate {}

impl PinUpdate {
    /// Starts an update with contact `contact_id` of `store` at `now`, in
    /// `window`: `floor(now / 30)` (`None`) or the one before, for a host
    /// that found no peer showing the current session code.  The ephemeral
    /// key and the new device secret are drawn from `rng` (`None`: the
    /// operating system; a [`DeterministicRandom`] for tests only).
    ///
    /// Errors (with the store's detail): [`ErrorKind::NotFound`] (no such
    /// contact), [`ErrorKind::InvalidArgument`] (another window, a time out
    /// of range), [`ErrorKind::Database`].
    pub fn new(
        store: &ContactStore,
        contact_id: i64,
        window: Option<i64>,
        now: i64,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<PinUpdate> {
        init()?;
        let window = match window {
            Some(window) => window,
            None => online_verify::window_of(now)?,
        };
        let rng = exchange::raw_rng(rng);
        let mut out = ptr::null_mut();
        // SAFETY: live store handle; a live random source borrowed
        // exclusively (or NULL); out is a valid place.
        store.call_code(|raw| unsafe { sys::itsme_pin_update_new(raw, contact_id, window, rng, now, &mut out) })?;
        NonNull::new(out)
            .map(|raw| PinUpdate { raw, lock: Mutex::new(()), window })
            .ok_or_else(|| Error::internal("itsme_pin_update_new succeeded without a handle"))
    }

    /// Runs a call on the handle and adds the handle's last-error detail to
    /// a failure.
    fn call<T>(&self, body: impl FnOnce(*mut sys::itsme_pin_update) -> std::result::Result<T, Failure>) -> Result<T> {
        locked_call(&self.lock, self.raw.as_ptr(), body)
    }

    /// Runs a call that only returns a result code.
    fn call_code(&self, body: impl FnOnce(*mut sys::itsme_pin_update) -> i32) -> Result<()> {
        self.call(|raw| code_result(body(raw)))
    }

    /// Where the update stands on this side.
    pub fn state(&self) -> Result<PinUpdateState> {
        let mut state: sys::itsme_pin_update_state = 0;
        // SAFETY: live handle; the output is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_pin_update_status(raw, &mut state) })?;
        PinUpdateState::from_code(state).ok_or_else(|| {
            Error::internal(format!("libitsme returned PIN update state {state}, unknown to this binding"))
        })
    }

    /// The window of the session code.
    pub fn window(&self) -> i64 {
        self.window
    }

    /// The session code both devices show ("ECHO 0042"), from the seed and
    /// the window.
    pub fn session_code(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_SHORT_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_pin_update_session_code(raw, out, cap, len) }
            })
        })
    }

    /// The next frame to send to the peer, removed from the queue; empty
    /// when there is none.
    pub fn next_outgoing(&mut self) -> Result<Vec<u8>> {
        self.call(|raw| {
            read_bytes(PIN_UPDATE_FRAME_MAX, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_pin_update_next_outgoing(raw, out, cap, len) }
            })
        })
    }

    /// Feeds one frame from the peer at `now`; stores the new device
    /// secrets when the protocol says so, before the frame that follows
    /// them is queued.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (the update failed, or is done on
    /// this side), [`ErrorKind::Database`] (a write failed: nothing changed,
    /// and the same frame may be fed again), and, ending the update as
    /// failed: [`ErrorKind::MalformedMessage`],
    /// [`ErrorKind::AuthenticationFailed`] (a tampered frame, or a peer
    /// without the seed), [`ErrorKind::InvalidKey`] (a reflected key),
    /// [`ErrorKind::Expired`].
    pub fn receive(&mut self, bytes: &[u8], now: i64) -> Result<()> {
        // SAFETY: live handle; bytes valid for their length.
        self.call_code(|raw| unsafe { sys::itsme_pin_update_receive(raw, bytes.as_ptr(), bytes.len(), now) })
    }
}

impl Drop for PinUpdate {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_pin_update_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for PinUpdate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinUpdate").field("raw", &self.raw).field("window", &self.window).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for code in sys::ITSME_PIN_UPDATE_RUNNING..=sys::ITSME_PIN_UPDATE_FAILED {
            let state = PinUpdateState::from_code(code).unwrap();
            assert_eq!(state.code(), code);
            assert_eq!(PinUpdateState::try_from(code).unwrap(), state);
            assert_eq!(u32::from(state), code);
        }
        assert_eq!(PinUpdateState::from_code(0), None);
        assert_eq!(PinUpdateState::try_from(4).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}
