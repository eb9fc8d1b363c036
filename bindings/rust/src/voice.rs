//! Voice verification during a call (`itsme_voice`), the NATO words, and the
//! pure derivations of docs/PROTOCOL.md sections 9 and 10 (the degradation
//! code among them).

use super::*;

/// Words offered to each selector.
pub const VOICE_WORDS: usize = 5;

/// The shortest call binding, in bytes: the `binding` that
/// [`VoiceSession::new`], [`crate::OnlineVerify::new`],
/// [`crate::OnlineVerifyRendezvous::new`] and [`crate::RollCall::new`] take.
pub const CALL_BINDING_MIN: usize = sys::ITSME_CALL_BINDING_MIN;
/// The longest call binding, in bytes.
pub const CALL_BINDING_MAX: usize = sys::ITSME_CALL_BINDING_MAX;

/// A call binding as the C functions take it: NULL with 0 for none.  The
/// library checks the length ([`CALL_BINDING_MIN`] to [`CALL_BINDING_MAX`]
/// bytes) and refuses an empty binding that is not NULL; an empty slice is
/// refused here instead, since its pointer is no buffer to pass.
pub(crate) fn call_binding(binding: Option<&[u8]>) -> Result<(*const u8, usize)> {
    match binding {
        None => Ok((ptr::null(), 0)),
        Some([]) => Err(Error::new(
            sys::ITSME_E_INVALID_ARGUMENT,
            format!("a call binding is {CALL_BINDING_MIN} to {CALL_BINDING_MAX} bytes, not 0"),
        )),
        Some(bytes) => Ok((bytes.as_ptr(), bytes.len())),
    }
}

/// The NATO word of index 0 to 25 (`"ALFA"` ... `"ZULU"`); `None` for
/// another index.
///
/// ```
/// assert_eq!(itsme::nato_word(4), Some("ECHO"));
/// assert_eq!(itsme::nato_word(26), None);
/// ```
pub fn nato_word(index: u32) -> Option<&'static str> {
    // SAFETY: no pointer arguments; needs no initialisation.
    let word = unsafe { sys::itsme_nato_word(index) };
    if word.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated, static storage.
    unsafe { CStr::from_ptr(word) }.to_str().ok()
}

// ---------------------------------------------------------------------------
// States, turns, outcomes
// ---------------------------------------------------------------------------

/// The state of a [`VoiceSession`] (`itsme_voice_state`).
///
/// Converts to and from the C value: `u32::from(state)` and
/// `VoiceState::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VoiceState {
    /// Planned: waiting for the window to begin (`ITSME_VOICE_WAITING`).
    Waiting,
    /// Started (the window is used): the two selections
    /// (`ITSME_VOICE_SELECTING`).
    Selecting,
    /// The codes are ready: read yours aloud, enter what you heard
    /// (`ITSME_VOICE_COMPARING`).
    Comparing,
    /// The heard code was checked (`ITSME_VOICE_FINISHED`).
    Finished,
    /// A heard word that is not the selector's, a used window, or the time
    /// ran out; every later call fails (`ITSME_VOICE_FAILED`).
    Failed,
}

impl VoiceState {
    /// The C value of this state.
    pub fn code(self) -> sys::itsme_voice_state {
        match self {
            VoiceState::Waiting => sys::ITSME_VOICE_WAITING,
            VoiceState::Selecting => sys::ITSME_VOICE_SELECTING,
            VoiceState::Comparing => sys::ITSME_VOICE_COMPARING,
            VoiceState::Finished => sys::ITSME_VOICE_FINISHED,
            VoiceState::Failed => sys::ITSME_VOICE_FAILED,
        }
    }

    /// The state of a C value, or `None` for one this binding does not know.
    pub fn from_code(code: sys::itsme_voice_state) -> Option<Self> {
        match code {
            sys::ITSME_VOICE_WAITING => Some(VoiceState::Waiting),
            sys::ITSME_VOICE_SELECTING => Some(VoiceState::Selecting),
            sys::ITSME_VOICE_COMPARING => Some(VoiceState::Comparing),
            sys::ITSME_VOICE_FINISHED => Some(VoiceState::Finished),
            sys::ITSME_VOICE_FAILED => Some(VoiceState::Failed),
            _ => None,
        }
    }
}

impl From<VoiceState> for u32 {
    fn from(state: VoiceState) -> u32 {
        state.code()
    }
}

impl TryFrom<u32> for VoiceState {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        VoiceState::from_code(code)
            .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown voice state {code}")))
    }
}

/// Whose word is entered next in a [`VoiceSession`] (`ITSME_VOICE_TURN_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VoiceTurn {
    /// Not selecting: before the start, or both words entered
    /// (`ITSME_VOICE_TURN_NONE`).
    None,
    /// Choose one of your five words and say it (`ITSME_VOICE_TURN_MINE`).
    Mine,
    /// Enter the word the other person said, from all 26
    /// (`ITSME_VOICE_TURN_THEIRS`).
    Theirs,
}

impl VoiceTurn {
    /// The C value of this turn.
    pub fn code(self) -> u32 {
        match self {
            VoiceTurn::None => sys::ITSME_VOICE_TURN_NONE,
            VoiceTurn::Mine => sys::ITSME_VOICE_TURN_MINE,
            VoiceTurn::Theirs => sys::ITSME_VOICE_TURN_THEIRS,
        }
    }

    /// The turn of a C value, or `None` for one this binding does not know.
    pub fn from_code(code: u32) -> Option<Self> {
        match code {
            sys::ITSME_VOICE_TURN_NONE => Some(VoiceTurn::None),
            sys::ITSME_VOICE_TURN_MINE => Some(VoiceTurn::Mine),
            sys::ITSME_VOICE_TURN_THEIRS => Some(VoiceTurn::Theirs),
            _ => None,
        }
    }
}

impl From<VoiceTurn> for u32 {
    fn from(turn: VoiceTurn) -> u32 {
        turn.code()
    }
}

impl TryFrom<u32> for VoiceTurn {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        VoiceTurn::from_code(code)
            .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown voice turn {code}")))
    }
}

/// What [`VoiceSession::check`] found (`itsme_voice_outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VoiceOutcome {
    /// Code and device tag as expected: the contact is verified; a degraded
    /// contact stays degraded until a Security PIN Update
    /// (`ITSME_VOICE_VERIFIED`).
    Verified,
    /// The code is right, the tag is not: their device changed.  The
    /// contact is now degraded; tell the person
    /// (`ITSME_VOICE_DEVICE_CHANGED`).
    DeviceChanged,
    /// The code is wrong: not the person, or a mistake.  Nothing changed
    /// (`ITSME_VOICE_MISMATCH`).
    Mismatch,
    /// The code is right; this device holds no device secret for the
    /// contact, so the tag was not checked
    /// (`ITSME_VOICE_VERIFIED_TAG_UNCHECKED`).
    VerifiedTagUnchecked,
}

impl VoiceOutcome {
    /// The C value of this outcome.
    pub fn code(self) -> sys::itsme_voice_outcome {
        match self {
            VoiceOutcome::Verified => sys::ITSME_VOICE_VERIFIED,
            VoiceOutcome::DeviceChanged => sys::ITSME_VOICE_DEVICE_CHANGED,
            VoiceOutcome::Mismatch => sys::ITSME_VOICE_MISMATCH,
            VoiceOutcome::VerifiedTagUnchecked => sys::ITSME_VOICE_VERIFIED_TAG_UNCHECKED,
        }
    }

    /// The outcome of a C value, or `None` for one this binding does not
    /// know.
    pub fn from_code(code: sys::itsme_voice_outcome) -> Option<Self> {
        match code {
            sys::ITSME_VOICE_VERIFIED => Some(VoiceOutcome::Verified),
            sys::ITSME_VOICE_DEVICE_CHANGED => Some(VoiceOutcome::DeviceChanged),
            sys::ITSME_VOICE_MISMATCH => Some(VoiceOutcome::Mismatch),
            sys::ITSME_VOICE_VERIFIED_TAG_UNCHECKED => Some(VoiceOutcome::VerifiedTagUnchecked),
            _ => None,
        }
    }
}

impl From<VoiceOutcome> for u32 {
    fn from(outcome: VoiceOutcome) -> u32 {
        outcome.code()
    }
}

impl TryFrom<u32> for VoiceOutcome {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        VoiceOutcome::from_code(code)
            .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown voice outcome {code}")))
    }
}

/// When a session runs, as seen at a given time ([`VoiceSession::timing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VoiceTiming {
    /// The window (`floor(t / 30)`) the session uses; it begins at
    /// `30 * window`.
    pub window: i64,
    /// Seconds until the window begins; negative once it has.
    pub starts_in: i64,
    /// Seconds until the session ends (the end of the next window).
    pub ends_in: i64,
}

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

/// One voice verification with a stored contact (`itsme_voice`).
///
/// During a call, both people run a session with each other's contact:
/// [`VoiceSession::new`] plans it (the next unused window), both wait
/// [`VoiceTiming::starts_in`] seconds, [`VoiceSession::start`] when the
/// window begins, read [`VoiceSession::session_id`] aloud (the same on
/// both sides), then enter two words ([`VoiceSession::turn`] says whose:
/// on mine, one of my [`VoiceSession::words`]; on theirs, the word I heard,
/// from all 26), read [`VoiceSession::your_code`] aloud with its tag
/// ("ECHO 512, 47") and [`VoiceSession::check`] what was heard.
///
/// A host that embeds ItsMe in the call itself binds the session to that
/// call (`binding`, docs/PROTOCOL.md 9.7): the session ID and the codes take
/// it, so a device bound to another call, or not bound, reads another
/// session ID, and codes repeated from another call do not match.  Show
/// beside the session ID that the session is bound ("KILO 07, bound to this
/// call").
///
/// A word entered on their turn that is not among their five ends the
/// session ([`ErrorKind::AuthenticationFailed`]), with no retry.  A session
/// may start from 15 seconds before its window and lasts until the end of
/// the next window ([`ErrorKind::Expired`] after that).  A failure is
/// final: the state is [`VoiceState::Failed`] and later calls fail with
/// [`ErrorKind::InvalidState`].  Times are unix seconds.
///
/// The library keeps the session's contact store alive.  A session may be
/// shared between threads (`Send + Sync`): its calls are serialised.
/// Dropping it wipes its secrets.  Errors carry the session's last-error
/// detail (for [`VoiceSession::new`], the store's).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("itsme-doc-voice-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// use itsme::{ContactStore, Identity, SecretStore, VoiceSession, VoiceState};
/// let me = Identity::create(&SecretStore::memory()?, "Alice")?;
/// let contacts = ContactStore::open(&me, dir.join("alice.db"))?;
/// let bob = contacts.add("Bob", &[0x42; 32], &[7; 32], itsme::ExchangeMethod::Qr, 1_800_000_000)?;
/// let mut session = VoiceSession::new(&contacts, bob, None, 1_800_000_007)?;
/// let timing = session.timing(1_800_000_007)?;
/// assert_eq!((timing.window, timing.starts_in), (60_000_001, 23));
/// session.start(1_800_000_030)?;
/// assert_eq!(session.state()?, VoiceState::Selecting);
/// assert_eq!(session.words()?.len(), 5);
/// # drop(contacts);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), itsme::Error>(())
/// ```
pub struct VoiceSession {
    raw: NonNull<sys::itsme_voice>,
    /// Pairs each call with the last-error detail it left, and keeps two
    /// threads from using the handle at once.
    lock: Mutex<()>,
}

// SAFETY: the header forbids using an itsme_voice from two threads at once,
// and every call this type makes on its handle is serialised by `lock`; the
// handle is tied to no thread.  The library keeps the session's contact
// store alive.
unsafe impl Send for VoiceSession {}
// SAFETY: see above.
unsafe impl Sync for VoiceSession {}

impl VoiceSession {
    /// Plans a session with contact `contact_id` of `store` at `now`: the
    /// next window after `now` and after the last one used for the contact.
    /// `binding` binds it to the host's own call ([`CALL_BINDING_MIN`] to
    /// [`CALL_BINDING_MAX`] bytes that both devices of the call hold, the
    /// same for the whole call, that the relay and the call's server never
    /// see: docs/PROTOCOL.md 20.1 says which values qualify); `None`: not
    /// bound.
    ///
    /// Errors (with the store's detail): [`ErrorKind::NotFound`] (no such
    /// contact), [`ErrorKind::InvalidArgument`] (a binding of another
    /// length, a negative `now`), [`ErrorKind::Database`],
    /// [`ErrorKind::CorruptData`], [`ErrorKind::AuthenticationFailed`]
    /// (stored data altered).
    pub fn new(store: &ContactStore, contact_id: i64, binding: Option<&[u8]>, now: i64) -> Result<VoiceSession> {
        init()?;
        let (binding_ptr, binding_len) = call_binding(binding)?;
        let mut out = ptr::null_mut();
        // SAFETY: live store handle; the binding valid for its length (or
        // NULL with 0); out is a valid place.
        store.call_code(|raw| unsafe {
            sys::itsme_voice_new(raw, contact_id, binding_ptr, binding_len, now, &mut out)
        })?;
        NonNull::new(out)
            .map(|raw| VoiceSession { raw, lock: Mutex::new(()) })
            .ok_or_else(|| Error::internal("itsme_voice_new succeeded without a handle"))
    }

    /// Runs a call on the handle and adds the handle's last-error detail to
    /// a failure.
    fn call<T>(&self, body: impl FnOnce(*mut sys::itsme_voice) -> std::result::Result<T, Failure>) -> Result<T> {
        locked_call(&self.lock, self.raw.as_ptr(), body)
    }

    /// Runs a call that only returns a result code.
    fn call_code(&self, body: impl FnOnce(*mut sys::itsme_voice) -> i32) -> Result<()> {
        self.call(|raw| code_result(body(raw)))
    }

    /// The state, and whose word is entered next.
    pub fn status(&self) -> Result<(VoiceState, VoiceTurn)> {
        let mut state: sys::itsme_voice_state = 0;
        let mut turn = u32::MAX;
        // SAFETY: live handle; both outputs are valid places.
        self.call_code(|raw| unsafe { sys::itsme_voice_status(raw, &mut state, &mut turn) })?;
        let state = VoiceState::from_code(state)
            .ok_or_else(|| Error::internal(format!("libitsme returned voice state {state}, unknown to this binding")))?;
        let turn = VoiceTurn::from_code(turn)
            .ok_or_else(|| Error::internal(format!("libitsme returned voice turn {turn}, unknown to this binding")))?;
        Ok((state, turn))
    }

    /// Where the session stands.
    pub fn state(&self) -> Result<VoiceState> {
        Ok(self.status()?.0)
    }

    /// Whose word is entered next; [`VoiceTurn::None`] unless selecting.
    pub fn turn(&self) -> Result<VoiceTurn> {
        Ok(self.status()?.1)
    }

    /// The session's window and, from `now`, the seconds until it begins
    /// (negative once it has) and until the session ends.
    pub fn timing(&self, now: i64) -> Result<VoiceTiming> {
        let mut timing = VoiceTiming { window: 0, starts_in: 0, ends_in: 0 };
        // SAFETY: live handle; the three outputs are valid places.
        self.call_code(|raw| unsafe {
            sys::itsme_voice_timing(raw, now, &mut timing.window, &mut timing.starts_in, &mut timing.ends_in)
        })?;
        Ok(timing)
    }

    /// The window the session uses (it begins at `30 * window`).
    pub fn window(&self) -> Result<i64> {
        let mut window = 0i64;
        // SAFETY: live handle; a valid place and two NULL outputs, which
        // the header allows.
        self.call_code(|raw| unsafe {
            sys::itsme_voice_timing(raw, 0, &mut window, ptr::null_mut(), ptr::null_mut())
        })?;
        Ok(window)
    }

    /// Starts the session when its window begins (from 15 seconds before,
    /// for clock skew): uses the window for the contact in the session's
    /// store, atomically.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (too early: nothing changes, try
    /// again; or started already), [`ErrorKind::WindowUsed`] (another
    /// session took the window: this one has failed, plan a new one),
    /// [`ErrorKind::Expired`], [`ErrorKind::Database`].
    pub fn start(&mut self, now: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_voice_start(raw, now) })
    }

    /// The session ID both people read aloud ("KILO 07"): the same text on
    /// both devices means the same seed and window.
    pub fn session_id(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_VOICE_SESSION_ID_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_voice_session_id(raw, out, cap, len) }
            })
        })
    }

    /// This person's five word indices (0 to 25), sorted; show them as
    /// [`nato_word`] texts.
    pub fn words(&self) -> Result<[u8; VOICE_WORDS]> {
        let mut words = [0u8; VOICE_WORDS];
        // SAFETY: live handle; words is valid for VOICE_WORDS bytes.
        let mut len = 0usize;
        self.call_code(|raw| unsafe { sys::itsme_voice_words(raw, words.as_mut_ptr(), words.len(), &mut len) })?;
        Ok(words)
    }

    /// Enters the next selection (see [`VoiceSession::turn`]) at `now`: on
    /// my turn one of my five words, on theirs the word I heard.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (an index above 25, or on my
    /// turn a word not among mine: nothing changes),
    /// [`ErrorKind::AuthenticationFailed`] (on their turn, a word not among
    /// theirs: the session has failed), [`ErrorKind::InvalidState`] (not
    /// selecting), [`ErrorKind::Expired`].
    pub fn select(&mut self, word: u32, now: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_voice_select(raw, word, now) })
    }

    fn code(
        &self,
        function: unsafe extern "C" fn(*const sys::itsme_voice, *mut c_char, usize, *mut usize, *mut u32) -> i32,
    ) -> Result<(String, u32)> {
        let mut tag = u32::MAX;
        let text = self.call(|raw| {
            read_string(sys::ITSME_VOICE_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes; tag is a
                // valid place.
                unsafe { function(raw, out, cap, len, &mut tag) }
            })
        })?;
        Ok((text, tag))
    }

    /// "Your Code" to read aloud ("ECHO 512") and the device tag (0 to 99)
    /// to say after it.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (not both words entered yet, or
    /// the session failed).
    pub fn your_code(&self) -> Result<(String, u32)> {
        self.code(sys::itsme_voice_your_code)
    }

    /// "Their Code": the code and tag this device expects to hear; the tag
    /// is `None` when this device holds no device secret for the contact.
    ///
    /// Errors: as [`VoiceSession::your_code`].
    pub fn their_code(&self) -> Result<(String, Option<u32>)> {
        let (text, tag) = self.code(sys::itsme_voice_their_code)?;
        Ok((text, (tag != sys::ITSME_VOICE_TAG_UNKNOWN).then_some(tag)))
    }

    /// Checks what was heard at `now`: the code (a NATO word in any case,
    /// one space or `-`, three digits; surrounding spaces ignored) and the
    /// tag (0 to 99), in constant time; records the outcome on the contact
    /// in the session's store and finishes the session.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a code that does not parse,
    /// a tag above 99: nothing changes, enter it again),
    /// [`ErrorKind::InvalidState`] (no codes yet), [`ErrorKind::Expired`],
    /// [`ErrorKind::Database`].
    pub fn check(&mut self, heard_code: &str, heard_tag: u32, now: i64) -> Result<VoiceOutcome> {
        let heard = CText::arg(heard_code, "the heard code")?;
        let mut outcome: sys::itsme_voice_outcome = 0;
        // SAFETY: live handle; NUL-terminated code; outcome is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_voice_check(raw, heard.as_ptr(), heard_tag, now, &mut outcome) })?;
        VoiceOutcome::from_code(outcome)
            .ok_or_else(|| Error::internal(format!("libitsme returned voice outcome {outcome}, unknown to this binding")))
    }
}

impl Drop for VoiceSession {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_voice_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for VoiceSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VoiceSession").field("raw", &self.raw).finish()
    }
}

// ---------------------------------------------------------------------------
// Pure derivations
// ---------------------------------------------------------------------------
//
// `pid` is a party's id (PROTOCOL.md section 9): its 32-byte identity public
// key, or the 8 fingerprint bytes of an unauthenticated contact.

/// The session ID text (PROTOCOL.md section 9.2) of a 32-byte seed and a
/// window.
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes).
pub fn derive_session_id(seed: &[u8], window: i64) -> Result<String> {
    init()?;
    test_build("itsme_derive_session_id")?;
    read_string(sys::ITSME_VOICE_SESSION_ID_SIZE, |out, cap, len| {
        // SAFETY: seed valid for its length; out/len come from read_string.
        unsafe { sys::itsme_derive_session_id(seed.as_ptr(), seed.len(), window, out, cap, len) }
    })
    .map_err(|failure| failure.into_error(thread_detail))
}

/// The five word indices (PROTOCOL.md section 9.3) of the selector `pid`,
/// sorted.
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes).
pub fn derive_words(seed: &[u8], window: i64, pid: &[u8]) -> Result<[u8; VOICE_WORDS]> {
    init()?;
    test_build("itsme_derive_words")?;
    let mut words = [0u8; VOICE_WORDS];
    // SAFETY: slices valid for their lengths; words valid for VOICE_WORDS.
    let mut len = 0usize;
    let code = unsafe {
        sys::itsme_derive_words(
            seed.as_ptr(),
            seed.len(),
            window,
            pid.as_ptr(),
            pid.len(),
            words.as_mut_ptr(),
            words.len(),
            &mut len,
        )
    };
    match code {
        sys::ITSME_OK => Ok(words),
        code => Err(Error::new(code, thread_detail())),
    }
}

/// Whether the party with the lower pid selects first in `window`
/// (PROTOCOL.md section 9.4).
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes).
pub fn derive_lower_selects_first(seed: &[u8], window: i64) -> Result<bool> {
    init()?;
    test_build("itsme_derive_lower_selects_first")?;
    let mut lower_first = false;
    // SAFETY: seed valid for its length; lower_first is a valid place.
    match unsafe { sys::itsme_derive_lower_selects_first(seed.as_ptr(), seed.len(), window, &mut lower_first) } {
        sys::ITSME_OK => Ok(lower_first),
        code => Err(Error::new(code, thread_detail())),
    }
}

/// The code text of `speaker` (PROTOCOL.md section 9.6) for the
/// selections (`first`, `first_word`) then (`second`, `second_word`).
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes, a word index above 25).
pub fn derive_code(
    seed: &[u8],
    window: i64,
    first: &[u8],
    first_word: u32,
    second: &[u8],
    second_word: u32,
    speaker: &[u8],
) -> Result<String> {
    init()?;
    test_build("itsme_derive_code")?;
    read_string(sys::ITSME_VOICE_CODE_SIZE, |out, cap, len| {
        // SAFETY: slices valid for their lengths; out/len come from
        // read_string.
        unsafe {
            sys::itsme_derive_code(
                seed.as_ptr(),
                seed.len(),
                window,
                first.as_ptr(),
                first.len(),
                first_word,
                second.as_ptr(),
                second.len(),
                second_word,
                speaker.as_ptr(),
                speaker.len(),
                out,
                cap,
                len,
            )
        }
    })
    .map_err(|failure| failure.into_error(thread_detail))
}

/// The device tag (0 to 99, PROTOCOL.md section 10.1) of `speaker` with
/// its device secret (0 to 64 bytes; empty when there is none).
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes).
pub fn derive_device_tag(seed: &[u8], window: i64, speaker: &[u8], device_secret: &[u8]) -> Result<u32> {
    init()?;
    test_build("itsme_derive_device_tag")?;
    let mut tag = u32::MAX;
    // SAFETY: slices valid for their lengths; tag is a valid place.
    let code = unsafe {
        sys::itsme_derive_device_tag(
            seed.as_ptr(),
            seed.len(),
            window,
            speaker.as_ptr(),
            speaker.len(),
            device_secret.as_ptr(),
            device_secret.len(),
            &mut tag,
        )
    };
    match code {
        sys::ITSME_OK => Ok(tag),
        code => Err(Error::new(code, thread_detail())),
    }
}

/// Everything one side derives in a session ([`derive_voice`]): codes and
/// the session ID as values, words as indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VoiceDerivation {
    /// 0 to 2599: the word `session_id / 100` and two digits.
    pub session_id: u32,
    /// This side's five words, sorted.
    pub my_words: [u8; VOICE_WORDS],
    /// The other side's five words, sorted.
    pub their_words: [u8; VOICE_WORDS],
    /// Whether this side selects first.
    pub i_select_first: bool,
    /// 0 to 25999: the word `my_code / 1000` and three digits.
    pub my_code: u32,
    /// The other side's code.
    pub their_code: u32,
    /// This side's device tag, 0 to 99.
    pub my_tag: u32,
    /// The other side's device tag.
    pub their_tag: u32,
}

/// One side of a session in one call (PROTOCOL.md sections 9.2 to 10.1):
/// its pid and device secret, the other side's, and the two selections in
/// order (the first selector's word first).  Secrets are 0 to 64 bytes.
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes, a word index above 25).
#[allow(clippy::too_many_arguments)]
pub fn derive_voice(
    seed: &[u8],
    window: i64,
    my_pid: &[u8],
    their_pid: &[u8],
    my_secret: &[u8],
    their_secret: &[u8],
    first_word: u32,
    second_word: u32,
) -> Result<VoiceDerivation> {
    init()?;
    test_build("itsme_derive_voice")?;
    let mut out = sys::itsme_voice_derivation::default();
    // SAFETY: slices valid for their lengths; out is a valid place.
    let code = unsafe {
        sys::itsme_derive_voice(
            seed.as_ptr(),
            seed.len(),
            window,
            my_pid.as_ptr(),
            my_pid.len(),
            their_pid.as_ptr(),
            their_pid.len(),
            my_secret.as_ptr(),
            my_secret.len(),
            their_secret.as_ptr(),
            their_secret.len(),
            first_word,
            second_word,
            &mut out,
        )
    };
    if code != sys::ITSME_OK {
        return Err(Error::new(code, thread_detail()));
    }
    Ok(VoiceDerivation {
        session_id: out.session_id,
        my_words: out.my_words,
        their_words: out.their_words,
        i_select_first: out.i_select_first,
        my_code: out.my_code,
        their_code: out.their_code,
        my_tag: out.my_tag,
        their_tag: out.their_tag,
    })
}

/// The degradation code (PROTOCOL.md section 10.2) of the person `pid` for
/// the 10-byte interim device secret `secret`:
/// "ABCD-EFGH-IJKL-MNOP-QRST-UVWX".
///
/// Errors: [`ErrorKind::InvalidArgument`] (sizes).
pub fn derive_degradation_code(seed: &[u8], pid: &[u8], secret: &[u8]) -> Result<String> {
    init()?;
    test_build("itsme_derive_degradation_code")?;
    read_string(sys::ITSME_DEGRADATION_CODE_SIZE, |out, cap, len| {
        // SAFETY: slices valid for their lengths; out/len come from
        // read_string.
        unsafe {
            sys::itsme_derive_degradation_code(
                seed.as_ptr(),
                seed.len(),
                pid.as_ptr(),
                pid.len(),
                secret.as_ptr(),
                secret.len(),
                out,
                cap,
                len,
            )
        }
    })
    .map_err(|failure| failure.into_error(thread_detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_turns_and_outcomes_round_trip() {
        for code in sys::ITSME_VOICE_WAITING..=sys::ITSME_VOICE_FAILED {
            let state = VoiceState::from_code(code).unwrap();
            assert_eq!(state.code(), code);
            assert_eq!(VoiceState::try_from(code).unwrap(), state);
        }
        assert_eq!(VoiceState::from_code(0), None);
        assert_eq!(VoiceState::try_from(6).unwrap_err().kind(), ErrorKind::InvalidArgument);
        for code in sys::ITSME_VOICE_TURN_NONE..=sys::ITSME_VOICE_TURN_THEIRS {
            assert_eq!(u32::from(VoiceTurn::try_from(code).unwrap()), code);
        }
        assert_eq!(VoiceTurn::from_code(3), None);
        for code in sys::ITSME_VOICE_VERIFIED..=sys::ITSME_VOICE_VERIFIED_TAG_UNCHECKED {
            assert_eq!(u32::from(VoiceOutcome::try_from(code).unwrap()), code);
        }
        assert_eq!(VoiceOutcome::from_code(0), None);
    }

    #[test]
    fn nato_words() {
        let words: Vec<&str> = (0..26).map(|i| nato_word(i).unwrap()).collect();
        assert_eq!((words[0], words[13], words[25]), ("ALFA", "NOVEMBER", "ZULU"));
        assert_eq!(nato_word(26), None);
        assert_eq!(nato_word(u32::MAX), None);
    }
}
