//! Online Verify through a relay room (`itsme_online_verify`),
//! docs/PROTOCOL.md section 11.

use super::*;

/// Longest Online Verify message, in bytes (a PROOF carrying a profile
/// reference).
pub const ONLINE_VERIFY_MESSAGE_MAX: usize = sys::ITSME_ONLINE_VERIFY_MESSAGE_MAX;

/// The window of a time, `floor(now / 30)`, as the library computes it
/// (`itsme_window_of`, docs/PROTOCOL.md 9.1): the window [`OnlineVerify::new`]
/// and [`crate::PinUpdate::new`] take, or the one before.
///
/// Errors: [`ErrorKind::InvalidArgument`] for a time before 1970 or after
/// 9999.
pub fn window_of(now: i64) -> Result<i64> {
    init()?;
    let mut window = 0i64;
    // SAFETY: window is a valid place.
    match unsafe { sys::itsme_window_of(now, &mut window) } {
        sys::ITSME_OK => Ok(window),
        code => Err(Error::new(code, thread_detail())),
    }
}

/// The state of an [`OnlineVerify`] session (`itsme_online_verify_state`).
///
/// Converts to and from the C value: `u32::from(state)` and
/// `OnlineVerifyState::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnlineVerifyState {
    /// Messages are still to be exchanged (`ITSME_ONLINE_VERIFY_RUNNING`).
    Running,
    /// Both proofs are checked: show the SAS for the two people to read
    /// aloud (`ITSME_ONLINE_VERIFY_COMPARE_SAS`).
    CompareSas,
    /// The SAS was confirmed and the outcome recorded
    /// (`ITSME_ONLINE_VERIFY_CONFIRMED`).
    Confirmed,
    /// The SAS was rejected, or the person gave up; nothing was recorded
    /// (`ITSME_ONLINE_VERIFY_REJECTED`).
    Rejected,
    /// A message was refused, or the time ran out; every later call fails
    /// (`ITSME_ONLINE_VERIFY_FAILED`).
    Failed,
    /// The peer's device proved it holds the seed, but one of the two
    /// sessions is bound to a call and the other is not (docs/PROTOCOL.md
    /// 11.4): final, nothing recorded, no SAS.  Say so: verify again with
    /// both bound, or neither (`ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS`).
    BindingDiffers,
    /// The peer's device proved it holds the seed, but it is bound to
    /// another call than this one (11.4): final, nothing recorded, no SAS.
    /// Warn: the person on this call may not be the contact (someone may
    /// be relaying between two calls)
    /// (`ITSME_ONLINE_VERIFY_STATE_OTHER_CALL`).
    OtherCall,
}

impl OnlineVerifyState {
    /// The C value of this state.
    pub fn code(self) -> sys::itsme_online_verify_state {
        match self {
            OnlineVerifyState::Running => sys::ITSME_ONLINE_VERIFY_RUNNING,
            OnlineVerifyState::CompareSas => sys::ITSME_ONLINE_VERIFY_COMPARE_SAS,
            OnlineVerifyState::Confirmed => sys::ITSME_ONLINE_VERIFY_CONFIRMED,
            OnlineVerifyState::Rejected => sys::ITSME_ONLINE_VERIFY_REJECTED,
            OnlineVerifyState::Failed => sys::ITSME_ONLINE_VERIFY_FAILED,
            OnlineVerifyState::BindingDiffers => sys::ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS,
            OnlineVerifyState::OtherCall => sys::ITSME_ONLINE_VERIFY_STATE_OTHER_CALL,
        }
    }

    /// The state of a C value, or `None` for one this binding does not know.
    pub fn from_code(code: sys::itsme_online_verify_state) -> Option<Self> {
        match code {
            sys::ITSME_ONLINE_VERIFY_RUNNING => Some(OnlineVerifyState::Running),
            sys::ITSME_ONLINE_VERIFY_COMPARE_SAS => Some(OnlineVerifyState::CompareSas),
            sys::ITSME_ONLINE_VERIFY_CONFIRMED => Some(OnlineVerifyState::Confirmed),
            sys::ITSME_ONLINE_VERIFY_REJECTED => Some(OnlineVerifyState::Rejected),
            sys::ITSME_ONLINE_VERIFY_FAILED => Some(OnlineVerifyState::Failed),
            sys::ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS => Some(OnlineVerifyState::BindingDiffers),
            sys::ITSME_ONLINE_VERIFY_STATE_OTHER_CALL => Some(OnlineVerifyState::OtherCall),
            _ => None,
        }
    }
}

impl From<OnlineVerifyState> for u32 {
    fn from(state: OnlineVerifyState) -> u32 {
        state.code()
    }
}

impl TryFrom<u32> for OnlineVerifyState {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        OnlineVerifyState::from_code(code).ok_or_else(|| {
            Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown online verify state {code}"))
        })
    }
}

/// One Online Verify session with a stored contact (`itsme_online_verify`).
///
/// Two people who are apart let their devices prove, through a two-party
/// relay room, that each holds the seed; the device tags are checked inside
/// the encrypted session; both read a SAS aloud.  The host joins the room
/// named by [`OnlineVerify::room`] (if no peer comes, it starts a second
/// session for the window before), sends every message
/// [`OnlineVerify::next_outgoing`] gives, passes every message that arrives
/// to [`OnlineVerify::receive`] while the state is
/// [`OnlineVerifyState::Running`], shows [`OnlineVerify::sas`] once the
/// state is [`OnlineVerifyState::CompareSas`], and then
/// [`OnlineVerify::confirm`]s or [`OnlineVerify::reject`]s.
///
/// A host that embeds ItsMe in the call itself binds the session to that
/// call (`binding`, docs/PROTOCOL.md 11.4).  A peer bound differently ends
/// the session, once its PROOF is checked, in
/// [`OnlineVerifyState::BindingDiffers`] (one of the two is bound and the
/// other is not) or [`OnlineVerifyState::OtherCall`] (both are bound, to
/// different calls: warn that the person on this call may not be the
/// contact); both are final, record nothing and show no SAS.
///
/// No window is used up.  A failure is final: the state is
/// [`OnlineVerifyState::Failed`] and later calls fail with
/// [`ErrorKind::InvalidState`].  A session expires 10 minutes after its
/// creation ([`ErrorKind::Expired`]).  Times are unix seconds.
///
/// The library keeps the session's contact store alive.  A session may be
/// shared between threads (`Send + Sync`): its calls are serialised.
/// Dropping it wipes its secrets.  Errors carry the session's last-error
/// detail (for [`OnlineVerify::new`], the store's).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("itsme-doc-online-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// use itsme::{ContactStore, Identity, OnlineVerify, OnlineVerifyState, SecretStore, VoiceOutcome};
/// let now = 1_800_000_000;
/// let alice = Identity::create(&SecretStore::memory()?, "Alice")?;
/// let bob = Identity::create(&SecretStore::memory()?, "Bob")?;
/// let at_alice = ContactStore::open(&alice, dir.join("a.db"))?;
/// let at_bob = ContactStore::open(&bob, dir.join("b.db"))?;
/// let seed = [7u8; 32]; // from their exchange
/// let bob_id = at_alice.add("Bob", &bob.public_key()?, &seed, itsme::ExchangeMethod::Qr, now)?;
/// let alice_id = at_bob.add("Alice", &alice.public_key()?, &seed, itsme::ExchangeMethod::Qr, now)?;
/// let mut a = OnlineVerify::new(&at_alice, bob_id, None, None, now, None)?;
/// let mut b = OnlineVerify::new(&at_bob, alice_id, None, None, now, None)?;
/// assert_eq!(a.room()?, b.room()?);
/// // The relay moves the messages.
/// loop {
///     let (from_a, from_b) = (a.next_outgoing()?, b.next_outgoing()?);
///     if from_a.is_empty() && from_b.is_empty() {
///         break;
///     }
///     if !from_a.is_empty() { b.receive(&from_a, now)?; }
///     if !from_b.is_empty() { a.receive(&from_b, now)?; }
/// }
/// assert_eq!(a.state()?, OnlineVerifyState::CompareSas);
/// assert_eq!(a.sas()?, b.sas()?);
/// // Read aloud, it matched; these contacts were added without device
/// // secrets, so the tags are not checked.
/// assert_eq!(a.confirm(now + 20)?, VoiceOutcome::VerifiedTagUnchecked);
/// # drop((at_alice, at_bob));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), itsme::Error>(())
/// ```
pub struct OnlineVerify {
    raw: NonNull<sys::itsme_online_verify>,
    /// Pairs each call with the last-error detail it left, and keeps two
    /// threads from using the handle at once.
    lock: Mutex<()>,
    window: i64,
}

// SAFETY: the header forbids using an itsme_online_verify from two threads
// at once, and every call this type makes on its handle is serialised by
// `lock`; the handle is tied to no thread.  The library keeps the
// session's contact store alive.
unsafe impl Send for OnlineVerify {}
// SAFETY: see above.
unsafe impl Sync for OnlineVerify {}

impl OnlineVerify {
    /// Starts a session with contact `contact_id` of `store` at `now`, in
    /// the room of `window`: `floor(now / 30)` (`None`) or the one before,
    /// for a host that found no peer in the current room.  `binding` binds
    /// it to the host's own call ([`CALL_BINDING_MIN`] to
    /// [`CALL_BINDING_MAX`] bytes that both devices of the call hold, the
    /// same for the whole call, that the relay and the call's server never
    /// see: docs/PROTOCOL.md 20.1 says which values qualify); `None`: not
    /// bound.  The ephemeral key and the challenge are drawn from `rng`
    /// (`None`: the operating system; a [`DeterministicRandom`] for tests
    /// only).
    ///
    /// Errors (with the store's detail): [`ErrorKind::NotFound`] (no such
    /// contact), [`ErrorKind::InvalidArgument`] (another window, a binding
    /// of another length, a time out of range), [`ErrorKind::Database`].
    pub fn new(
        store: &ContactStore,
        contact_id: i64,
        window: Option<i64>,
        binding: Option<&[u8]>,
        now: i64,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<OnlineVerify> {
        init()?;
        let (binding_ptr, binding_len) = voice::call_binding(binding)?;
        let window = match window {
            Some(window) => window,
            None => window_of(now)?,
        };
        let rng = exchange::raw_rng(rng);
        let mut out = ptr::null_mut();
        // SAFETY: live store handle; the binding valid for its length (or
        // NULL with 0); a live random source borrowed exclusively (or
        // NULL); out is a valid place.
        store.call_code(|raw| unsafe {
            sys::itsme_online_verify_new(raw, contact_id, window, binding_ptr, binding_len, rng, now, &mut out)
        })?;
        NonNull::new(out)
            .map(|raw| OnlineVerify { raw, lock: Mutex::new(()), window })
            .ok_or_else(|| Error::internal("itsme_online_verify_new succeeded without a handle"))
    }

    /// Runs a call on the handle and adds the handle's last-error detail to
    /// a failure.
    fn call<T>(&self, body: impl FnOnce(*mut sys::itsme_online_verify) -> std::result::Result<T, Failure>) -> Result<T> {
        locked_call(&self.lock, self.raw.as_ptr(), body)
    }

    /// Runs a call that only returns a result code.
    fn call_code(&self, body: impl FnOnce(*mut sys::itsme_online_verify) -> i32) -> Result<()> {
        self.call(|raw| code_result(body(raw)))
    }

    /// Where the session stands.
    pub fn state(&self) -> Result<OnlineVerifyState> {
        let mut state: sys::itsme_online_verify_state = 0;
        // SAFETY: live handle; the output is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_online_verify_status(raw, &mut state) })?;
        OnlineVerifyState::from_code(state).ok_or_else(|| {
            Error::internal(format!("libitsme returned online verify state {state}, unknown to this binding"))
        })
    }

    /// The window whose room the session uses.
    pub fn window(&self) -> i64 {
        self.window
    }

    /// The relay room's name: 32 lowercase hexadecimal digits, the same on
    /// both devices for the same seed and window.
    pub fn room(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_ROOM_NAME_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_online_verify_room(raw, out, cap, len) }
            })
        })
    }

    /// The next message to send to the peer, removed from the queue; empty
    /// when there is none.
    pub fn next_outgoing(&mut self) -> Result<Vec<u8>> {
        self.call(|raw| {
            read_bytes(ONLINE_VERIFY_MESSAGE_MAX, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_online_verify_next_outgoing(raw, out, cap, len) }
            })
        })
    }

    /// Feeds one message from the peer at `now`.  Check the state after
    /// each: the peer's PROOF moves the session to
    /// [`OnlineVerifyState::CompareSas`], or (with `Ok` too) to
    /// [`OnlineVerifyState::BindingDiffers`] or
    /// [`OnlineVerifyState::OtherCall`] when the two devices are bound
    /// differently.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (the session failed, or its
    /// messages are complete), and, ending the session as failed:
    /// [`ErrorKind::MalformedMessage`] (malformed, out of order, received
    /// twice), [`ErrorKind::AuthenticationFailed`] (a commitment, tag or
    /// proof is wrong: not the person, or a tampered or replayed message),
    /// [`ErrorKind::InvalidKey`] (a reflected key or challenge, a low-order
    /// key), [`ErrorKind::Expired`].
    pub fn receive(&mut self, bytes: &[u8], now: i64) -> Result<()> {
        // SAFETY: live handle; bytes valid for their length.
        self.call_code(|raw| unsafe { sys::itsme_online_verify_receive(raw, bytes.as_ptr(), bytes.len(), now) })
    }

    /// Sends the reference of this person's current profile record
    /// ([`Profile::reference`], [`PROFILE_REFERENCE_BYTES`]) inside this
    /// session's PROOF, encrypted for the peer, who can read it once the SAS
    /// is confirmed ([`OnlineVerify::peer_profile`]).  Call before the PROOF
    /// is made, that is before receiving the peer's KEY: right after
    /// [`OnlineVerify::new`] is safe.  Calling again replaces it.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (not
    /// [`PROFILE_REFERENCE_BYTES`] long), [`ErrorKind::InvalidState`] (the
    /// PROOF is made already, or the session has failed).
    pub fn share_profile(&mut self, reference: &[u8]) -> Result<()> {
        // SAFETY: live handle; the reference valid for its length.
        self.call_code(|raw| unsafe {
            sys::itsme_online_verify_share_profile(raw, reference.as_ptr(), reference.len())
        })
    }

    /// The profile reference the peer sent in its PROOF, once the SAS is
    /// confirmed ([`OnlineVerifyState::Confirmed`]): fetch the record it
    /// names ([`ProfileReference::record_name`]) from the relay, open it
    /// with [`Profile::open`] and the contact's public key, and offer it to
    /// the person.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (not confirmed),
    /// [`ErrorKind::NotFound`] (the peer sent none).
    pub fn peer_profile(&self) -> Result<ProfileReference> {
        self.call(|raw| {
            profile::read_reference(|out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_online_verify_peer_profile(raw, out, cap, len) }
            })
        })
    }

    /// The SAS both people read aloud ("ECHO 0042"), once both proofs are
    /// checked.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (no SAS yet, none at all: the
    /// session failed or ended bound differently).
    pub fn sas(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_SHORT_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_online_verify_sas(raw, out, cap, len) }
            })
        })
    }

    /// The SAS matched: records the outcome on the contact in the session's
    /// store at `now`, as voice verification does, and returns it:
    /// [`VoiceOutcome::Verified`], [`VoiceOutcome::DeviceChanged`] or
    /// [`VoiceOutcome::VerifiedTagUnchecked`].
    ///
    /// Errors: [`ErrorKind::InvalidState`] (no SAS yet, or finished),
    /// [`ErrorKind::Expired`], [`ErrorKind::Database`].
    pub fn confirm(&mut self, now: i64) -> Result<VoiceOutcome> {
        let mut outcome: sys::itsme_voice_outcome = 0;
        // SAFETY: live handle; outcome is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_online_verify_confirm(raw, now, &mut outcome) })?;
        VoiceOutcome::from_code(outcome)
            .ok_or_else(|| Error::internal(format!("libitsme returned voice outcome {outcome}, unknown to this binding")))
    }

    /// The SAS differed, or the person gave up: nothing is recorded.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (already finished or failed).
    pub fn reject(&mut self) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_online_verify_reject(raw) })
    }
}

impl Drop for OnlineVerify {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_online_verify_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for OnlineVerify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnlineVerify").field("raw", &self.raw).field("window", &self.window).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for code in sys::ITSME_ONLINE_VERIFY_RUNNING..=sys::ITSME_ONLINE_VERIFY_STATE_OTHER_CALL {
            let state = OnlineVerifyState::from_code(code).unwrap();
            assert_eq!(state.code(), code);
            assert_eq!(OnlineVerifyState::try_from(code).unwrap(), state);
            assert_eq!(u32::from(state), code);
        }
        assert_eq!(OnlineVerifyState::BindingDiffers.code(), sys::ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS);
        assert_eq!(OnlineVerifyState::OtherCall.code(), sys::ITSME_ONLINE_VERIFY_STATE_OTHER_CALL);
        assert_eq!(OnlineVerifyState::from_code(0), None);
        assert_eq!(OnlineVerifyState::try_from(8).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn windows() {
        assert_eq!(window_of(1_800_000_000).unwrap(), 60_000_000);
        assert_eq!(window_of(1_800_000_029).unwrap(), 60_000_000);
        assert_eq!(window_of(1_800_000_030).unwrap(), 60_000_001);
        assert_eq!(window_of(29).unwrap(), 0);
        assert_eq!(window_of(-1).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(window_of(253_402_300_800).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}

/// The room rule of docs/PROTOCOL.md 11.1 (`itsme_online_verify_rendezvous`):
/// which relay rooms an Online Verify with a contact joins, and which
/// session goes on.
///
/// It makes the two sessions (the current window's and the previous
/// one's).  The host joins [`OnlineVerifyRendezvous::rooms`] (at first the
/// current window's only); when a room's first event is not the peer's
/// arrival it reports [`OnlineVerifyRendezvous::alone`] and asks for the
/// rooms again (the previous window's is added); the first
/// [`OnlineVerifyRendezvous::peer_joined`] gives the session to run in
/// that room.  The host leaves the other room.
pub struct OnlineVerifyRendezvous {
    raw: NonNull<sys::itsme_online_verify_rendezvous>,
    lock: Mutex<()>,
    /// The rooms of the current window and of the previous one.
    rooms: [String; 2],
    window: i64,
}

// SAFETY: every call this type makes on its handle is serialised by
// `lock`; the handle is tied to no thread, and the library serialises the
// calls on the sessions it gives out.
unsafe impl Send for OnlineVerifyRendezvous {}
// SAFETY: see above.
unsafe impl Sync for OnlineVerifyRendezvous {}

impl OnlineVerifyRendezvous {
    /// Makes the sessions with contact `contact_id` of `store` for the
    /// window of `now` and the one before, both bound to `binding` as
    /// [`OnlineVerify::new`] says (`None`: not bound), drawn from `rng`
    /// (`None`: the operating system) in that order.
    ///
    /// Errors (with the store's detail): those of [`OnlineVerify::new`].
    pub fn new(
        store: &ContactStore,
        contact_id: i64,
        binding: Option<&[u8]>,
        now: i64,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<OnlineVerifyRendezvous> {
        init()?;
        let (binding_ptr, binding_len) = voice::call_binding(binding)?;
        let rng = exchange::raw_rng(rng);
        let mut out = ptr::null_mut();
        // SAFETY: live store handle; the binding valid for its length (or
        // NULL with 0); a live random source borrowed exclusively (or
        // NULL); out is a valid place.
        store.call_code(|raw| unsafe {
            sys::itsme_online_verify_rendezvous_new(raw, contact_id, binding_ptr, binding_len, rng, now, &mut out)
        })?;
        let raw = NonNull::new(out)
            .ok_or_else(|| Error::internal("itsme_online_verify_rendezvous_new succeeded without a handle"))?;
        let mut rendezvous =
            OnlineVerifyRendezvous { raw, lock: Mutex::new(()), rooms: [String::new(), String::new()], window: window_of(now)? };
        for index in 0..2 {
            rendezvous.rooms[index] = rendezvous.session(index)?.room()?;
        }
        Ok(rendezvous)
    }

    fn call<T>(
        &self,
        body: impl FnOnce(*mut sys::itsme_online_verify_rendezvous) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        locked_call(&self.lock, self.raw.as_ptr(), body)
    }

    /// The rooms to be in now, in order of joining.
    pub fn rooms(&self) -> Result<Vec<String>> {
        self.call(|raw| {
            let mut count = 0usize;
            // SAFETY: live handle; the output is a valid place.
            code_result(unsafe { sys::itsme_online_verify_rendezvous_room_count(raw, &mut count) })?;
            (0..count)
                .map(|index| {
                    read_string(sys::ITSME_ROOM_NAME_SIZE, |out, cap, len| {
                        // SAFETY: live handle; out valid for cap bytes.
                        unsafe { sys::itsme_online_verify_rendezvous_room(raw, index, out, cap, len) }
                    })
                })
                .collect()
        })
    }

    fn wrap(&self, out: *mut sys::itsme_online_verify, index: usize) -> Result<OnlineVerify> {
        NonNull::new(out)
            .map(|raw| OnlineVerify { raw, lock: Mutex::new(()), window: self.window - index as i64 })
            .ok_or_else(|| Error::internal("libitsme gave no session"))
    }

    /// The session of candidate `index`: 0 the current window's, 1 the
    /// previous one's, for what must be done before any message
    /// ([`OnlineVerify::share_profile`]).  The same session as the one
    /// [`OnlineVerifyRendezvous::peer_joined`] may give.
    pub fn session(&self, index: usize) -> Result<OnlineVerify> {
        let mut out = ptr::null_mut();
        // SAFETY: live handle; out is a valid place.
        self.call(|raw| code_result(unsafe { sys::itsme_online_verify_rendezvous_session(raw, index, &mut out) }))?;
        self.wrap(out, index)
    }

    /// The first event of the current window's room was not the peer's
    /// arrival: the previous window's room is to be joined too.
    pub fn alone(&self, room: &str) -> Result<()> {
        let room = CText::arg(room, "room")?;
        // SAFETY: live handle; a NUL-terminated text.
        self.call(|raw| code_result(unsafe { sys::itsme_online_verify_rendezvous_alone(raw, room.as_ptr()) }))
    }

    /// The peer joined `room`: the session to run there (the first report
    /// chooses it).  [`ErrorKind::InvalidArgument`] for a room not to be in.
    pub fn peer_joined(&self, room: &str) -> Result<OnlineVerify> {
        let text = CText::arg(room, "room")?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle; a NUL-terminated text; out is a valid place.
        self.call(|raw| {
            code_result(unsafe { sys::itsme_online_verify_rendezvous_peer_joined(raw, text.as_ptr(), &mut out) })
        })?;
        let chosen = self.rooms()?;
        let index = if chosen.first().map(String::as_str) == Some(self.rooms[1].as_str()) { 1 } else { 0 };
        self.wrap(out, index)
    }
}

impl Drop for OnlineVerifyRendezvous {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_online_verify_rendezvous_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for OnlineVerifyRendezvous {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnlineVerifyRendezvous").field("window", &self.window).finish_non_exhaustive()
    }
}
