//! The roll call (`itsme_rollcall`), docs/PROTOCOL.md section 20: everyone
//! on a conference call checks at once which participants are contacts
//! whose devices hold the seed exchanged with them.

use super::*;

/// Longest roll-call message, in bytes: a HELLO of 2048 presence tags,
/// 133 + 16 * 2048 (a VIEW is at most 3351 bytes, a SAID 2581).
pub const ROLLCALL_MESSAGE_MAX: usize = sys::ITSME_ROLLCALL_MESSAGE_MAX;
/// A roster hash ([`RollCall::roster`]), in bytes.
pub const ROLLCALL_ROSTER_BYTES: usize = sys::ITSME_ROLLCALL_ROSTER_BYTES;

/// Where a [`RollCall`] stands on this device (`itsme_rollcall_phase`).
///
/// Converts to and from the C value: `u32::from(phase)` and
/// `RollCallPhase::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RollCallPhase {
    /// Participants arrive; this round's roster is not confirmed
    /// (`ITSME_ROLLCALL_PHASE_GATHERING`).
    Gathering,
    /// The roster is confirmed: read [`RollCall::code`] aloud, then
    /// [`RollCall::confirm_said`] (`ITSME_ROLLCALL_PHASE_CONFIRMED`).
    Confirmed,
    /// This device's sealed codes went out for this round
    /// (`ITSME_ROLLCALL_PHASE_SAID`).
    Said,
    /// The lifetime (10 minutes) passed: final
    /// (`ITSME_ROLLCALL_PHASE_EXPIRED`).
    Expired,
}

impl RollCallPhase {
    /// The C value of this phase.
    pub fn code(self) -> sys::itsme_rollcall_phase {
        match self {
            RollCallPhase::Gathering => sys::ITSME_ROLLCALL_PHASE_GATHERING,
            RollCallPhase::Confirmed => sys::ITSME_ROLLCALL_PHASE_CONFIRMED,
            RollCallPhase::Said => sys::ITSME_ROLLCALL_PHASE_SAID,
            RollCallPhase::Expired => sys::ITSME_ROLLCALL_PHASE_EXPIRED,
        }
    }

    /// The phase of a C value, or `None` for one this binding does not know.
    pub fn from_code(code: sys::itsme_rollcall_phase) -> Option<Self> {
        match code {
            sys::ITSME_ROLLCALL_PHASE_GATHERING => Some(RollCallPhase::Gathering),
            sys::ITSME_ROLLCALL_PHASE_CONFIRMED => Some(RollCallPhase::Confirmed),
            sys::ITSME_ROLLCALL_PHASE_SAID => Some(RollCallPhase::Said),
            sys::ITSME_ROLLCALL_PHASE_EXPIRED => Some(RollCallPhase::Expired),
            _ => None,
        }
    }
}

impl From<RollCallPhase> for u32 {
    fn from(phase: RollCallPhase) -> u32 {
        phase.code()
    }
}

impl TryFrom<u32> for RollCallPhase {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        RollCallPhase::from_code(code)
            .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown roll call phase {code}")))
    }
}

/// A participant's state as shown beside it (`itsme_rollcall_state`,
/// docs/PROTOCOL.md 20.5).
///
/// Converts to and from the C value: `u32::from(state)` and
/// `RollCallState::try_from(value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RollCallState {
    /// A contact whose code is not checked yet (`ITSME_ROLLCALL_STATE_NOT_YET`).
    NotYet,
    /// The code heard is the one their device sealed, from the device known
    /// (`ITSME_ROLLCALL_STATE_VERIFIED`).
    Verified,
    /// The code heard is not the one their device sealed: type it again,
    /// three times in a round at most (`ITSME_ROLLCALL_STATE_WRONG`).
    Wrong,
    /// The code matched, from another device than the one known
    /// (`ITSME_ROLLCALL_STATE_DEVICE_CHANGED`).
    DeviceChanged,
    /// The code matched; no device secret of theirs is known here
    /// (`ITSME_ROLLCALL_STATE_VERIFIED_TAG_UNCHECKED`).
    VerifiedTagUnchecked,
    /// Their sealed code of this round did not open (tampered with, or
    /// sealed for another device): neither verified nor wrong
    /// (`ITSME_ROLLCALL_STATE_REFUSED`).
    Refused,
    /// This device, or a device that holds no seed with this one
    /// (`ITSME_ROLLCALL_STATE_UNKNOWN`).
    Unknown,
    /// One of the two devices binds the roll call to its call and the other
    /// does not: nothing can be checked between them
    /// (`ITSME_ROLLCALL_STATE_BINDING_DIFFERS`).
    BindingDiffers,
    /// Both devices bind the roll call to a call, and the calls differ: a
    /// device in another call (`ITSME_ROLLCALL_STATE_OTHER_CALL`).
    OtherCall,
}

impl RollCallState {
    /// The C value of this state.
    pub fn code(self) -> sys::itsme_rollcall_state {
        match self {
            RollCallState::NotYet => sys::ITSME_ROLLCALL_STATE_NOT_YET,
            RollCallState::Verified => sys::ITSME_ROLLCALL_STATE_VERIFIED,
            RollCallState::Wrong => sys::ITSME_ROLLCALL_STATE_WRONG,
            RollCallState::DeviceChanged => sys::ITSME_ROLLCALL_STATE_DEVICE_CHANGED,
            RollCallState::VerifiedTagUnchecked => sys::ITSME_ROLLCALL_STATE_VERIFIED_TAG_UNCHECKED,
            RollCallState::Refused => sys::ITSME_ROLLCALL_STATE_REFUSED,
            RollCallState::Unknown => sys::ITSME_ROLLCALL_STATE_UNKNOWN,
            RollCallState::BindingDiffers => sys::ITSME_ROLLCALL_STATE_BINDING_DIFFERS,
            RollCallState::OtherCall => sys::ITSME_ROLLCALL_STATE_OTHER_CALL,
        }
    }

    /// The state of a C value, or `None` for one this binding does not know.
    pub fn from_code(code: sys::itsme_rollcall_state) -> Option<Self> {
        match code {
            sys::ITSME_ROLLCALL_STATE_NOT_YET => Some(RollCallState::NotYet),
            sys::ITSME_ROLLCALL_STATE_VERIFIED => Some(RollCallState::Verified),
            sys::ITSME_ROLLCALL_STATE_WRONG => Some(RollCallState::Wrong),
            sys::ITSME_ROLLCALL_STATE_DEVICE_CHANGED => Some(RollCallState::DeviceChanged),
            sys::ITSME_ROLLCALL_STATE_VERIFIED_TAG_UNCHECKED => Some(RollCallState::VerifiedTagUnchecked),
            sys::ITSME_ROLLCALL_STATE_REFUSED => Some(RollCallState::Refused),
            sys::ITSME_ROLLCALL_STATE_UNKNOWN => Some(RollCallState::Unknown),
            sys::ITSME_ROLLCALL_STATE_BINDING_DIFFERS => Some(RollCallState::BindingDiffers),
            sys::ITSME_ROLLCALL_STATE_OTHER_CALL => Some(RollCallState::OtherCall),
            _ => None,
        }
    }

    fn read(code: sys::itsme_rollcall_state) -> std::result::Result<Self, Failure> {
        RollCallState::from_code(code).ok_or_else(|| {
            Failure::Binding(Error::internal(format!("libitsme returned roll call state {code}, unknown to this binding")))
        })
    }
}

impl From<RollCallState> for u32 {
    fn from(state: RollCallState) -> u32 {
        state.code()
    }
}

impl TryFrom<u32> for RollCallState {
    type Error = Error;

    /// [`ErrorKind::InvalidArgument`] for a value this binding does not know.
    fn try_from(code: u32) -> Result<Self> {
        RollCallState::from_code(code)
            .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("unknown roll call state {code}")))
    }
}

/// One device of a roll call as this device sees it
/// (`itsme_rollcall_participant_info`): every device ever present stays in
/// the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Participant {
    /// 0 for this device; the others in the order they became present.
    pub index: usize,
    /// The relay slot it speaks from (`None` for this device).
    pub slot: Option<u16>,
    /// The contact it is (`None` for this device and for a device that is
    /// not a contact).
    pub contact_id: Option<i64>,
    /// What to show beside it.
    pub state: RollCallState,
    /// It is not present now (its connection left; it may come back under
    /// the same place).
    pub left: bool,
    /// Its device holds the same roster as this one (always for this
    /// device): show the others as "not agreeing yet".
    pub agrees: bool,
}

/// A new meeting code, as shown ("ABCD-EFGH"), to share on the call: the
/// form of an invite code (docs/PROTOCOL.md 16.1), drawn from `rng` (`None`:
/// the operating system; a [`DeterministicRandom`] for tests only).  Check
/// what a person typed with [`check_remote_code`].
pub fn new_meeting_code(rng: Option<&mut DeterministicRandom>) -> Result<String> {
    init()?;
    let rng = exchange::raw_rng(rng);
    detailed(|| {
        read_string(sys::ITSME_REMOTE_CODE_SIZE, |out, cap, len| {
            // SAFETY: a live random source borrowed exclusively (or NULL);
            // out valid for cap bytes.
            unsafe { sys::itsme_meeting_code_new(rng, out, cap, len) }
        })
    })
}

/// A roll call on this device (`itsme_rollcall`), docs/PROTOCOL.md 20.
///
/// Everyone on the call makes one with the same meeting code
/// ([`new_meeting_code`] draws one); each takes every contact of its store,
/// and may bind it to the host's own call ([`RollCall::new`]).  The library
/// does no I/O and decides every message: the host joins the relay's group
/// room [`RollCall::room`] and reports its events ([`RollCall::joined`], at
/// the first join and after every reconnection; [`RollCall::peer_joined`];
/// [`RollCall::peer_left`]), feeds every message of the room with the slot
/// that carried it to [`RollCall::receive`], calls [`RollCall::tick`] about
/// once a second, and after each call sends what
/// [`RollCall::next_outgoing`] gives until it gives nothing.  The owner,
/// shown the [`RollCall::participants`] (with the [`RollCall::head_count`]
/// to compare with the faces on the call, and a [`RollCall::split`] when
/// there is one), confirms them with the [`RollCall::roster`] read then
/// ([`RollCall::confirm_roster`]), reads [`RollCall::code`] aloud, says so
/// ([`RollCall::confirm_said`]), and types what each contact read
/// ([`RollCall::enter_heard`]).
///
/// A participant is present once its signed VIEW lists this device.  A new
/// roster starts a new round ([`RollCallPhase::Gathering`] again); checks
/// made stay, and a roster that comes back (a participant's connection
/// dropped and came back) brings its round back.  A refused message changes
/// nothing and the roll call goes on.  It lasts 10 minutes from its creation
/// ([`ErrorKind::Expired`] after that).  Times are unix seconds; relay slots
/// are 1 to 65535.
///
/// The library keeps the roll call's contact store alive.  A roll call may
/// be shared between threads (`Send + Sync`): its calls are serialised.
/// Dropping it wipes its secrets.  Errors carry the roll call's last-error
/// detail (for [`RollCall::new`], the store's).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("itsme-doc-rollcall-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// use itsme::{ContactStore, Identity, RollCall, RollCallState, SecretStore};
///
/// /// The relay's group room between two devices, Alice in slot 1 and Bob
/// /// in slot 2: every queued message handed over until both are quiet.
/// fn deliver(a: &mut RollCall, b: &mut RollCall, now: i64) -> itsme::Result<()> {
///     loop {
///         let (from_a, from_b) = (a.next_outgoing()?, b.next_outgoing()?);
///         if from_a.is_empty() && from_b.is_empty() {
///             return Ok(());
///         }
///         if !from_a.is_empty() {
///             b.receive(&from_a, 1, now)?;
///         }
///         if !from_b.is_empty() {
///             a.receive(&from_b, 2, now)?;
///         }
///     }
/// }
///
/// let now = 1_800_000_000;
/// let alice = Identity::create(&SecretStore::memory()?, "Alice")?;
/// let bob = Identity::create(&SecretStore::memory()?, "Bob")?;
/// let at_alice = ContactStore::open(&alice, dir.join("a.db"))?;
/// let at_bob = ContactStore::open(&bob, dir.join("b.db"))?;
/// let seed = [7u8; 32]; // from their exchange
/// let bob_id = at_alice.add("Bob", &bob.public_key()?, &seed, itsme::ExchangeMethod::Qr, now)?;
/// at_bob.add("Alice", &alice.public_key()?, &seed, itsme::ExchangeMethod::Qr, now)?;
/// let code = itsme::new_meeting_code(None)?;
/// let mut a = RollCall::new(&at_alice, &code, None, now, None)?;
/// let mut b = RollCall::new(&at_bob, &code, None, now, None)?;
/// assert_eq!(a.room()?, b.room()?);
/// // Alice joins the room first (slot 1), then Bob (slot 2).
/// a.joined(1, &[], now)?;
/// a.peer_joined(2, now)?;
/// b.joined(2, &[1], now)?;
/// deliver(&mut a, &mut b, now)?;
/// // A second later (the host ticks about once a second) the VIEWs due go
/// // out: each device sees that the other holds the same roster.
/// let now = now + 1;
/// a.tick(now)?;
/// b.tick(now)?;
/// deliver(&mut a, &mut b, now)?;
/// assert_eq!((a.head_count()?, b.head_count()?), (2, 2));
/// assert!(a.participants()?.iter().all(|p| p.agrees && !p.left));
/// for call in [&mut a, &mut b] {
///     let roster = call.roster()?; // shown with the participants
///     call.confirm_roster(&roster, now, None)?;
/// }
/// let (said_by_a, said_by_b) = (a.code()?, b.code()?); // read aloud
/// a.confirm_said(now, None)?;
/// b.confirm_said(now, None)?;
/// deliver(&mut a, &mut b, now)?;
/// let bob_here = a.participants()?.into_iter().find(|p| p.contact_id == Some(bob_id)).unwrap();
/// // Added without device secrets, so the device is not checked.
/// assert_eq!(a.enter_heard(bob_here.index, &said_by_b, now)?, RollCallState::VerifiedTagUnchecked);
/// # let _ = said_by_a;
/// # drop((at_alice, at_bob));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), itsme::Error>(())
/// ```
pub struct RollCall {
    raw: NonNull<sys::itsme_rollcall>,
    /// Keeps two threads from using the handle at once.
    lock: Mutex<()>,
}

// SAFETY: the header forbids using an itsme_rollcall from two threads at
// once, and every call this type makes on its handle is serialised by
// `lock`; the handle is tied to no thread.  The library keeps the roll
// call's contact store alive.
unsafe impl Send for RollCall {}
// SAFETY: see above.
unsafe impl Sync for RollCall {}

impl RollCall {
    /// A roll call named by `meeting_code` (as typed: either case, spaces
    /// and `-` ignored) at `now`, with every contact of `store` (but those
    /// awaiting the peer).  `binding` binds it to the host's own call
    /// ([`CALL_BINDING_MIN`] to [`CALL_BINDING_MAX`] bytes that every
    /// participant of that call holds, the same for the whole call, that the
    /// relay never sees: docs/PROTOCOL.md 20.1 says which values qualify);
    /// `None`: not bound.  A device bound to another call checks nobody of
    /// this one.  The roll-call key and the HELLO's padding are drawn from
    /// `rng` (`None`: the operating system; a [`DeterministicRandom`] for
    /// tests only).  Nothing is queued before [`RollCall::joined`].
    ///
    /// Errors (with the store's detail): [`ErrorKind::InvalidArgument`] (a
    /// meeting code with a typo, a binding of another length, a store of
    /// more than 2048 contacts, a time out of range), [`ErrorKind::Database`].
    pub fn new(
        store: &ContactStore,
        meeting_code: &str,
        binding: Option<&[u8]>,
        now: i64,
        rng: Option<&mut DeterministicRandom>,
    ) -> Result<RollCall> {
        init()?;
        let code = CText::arg(meeting_code, "the meeting code")?;
        let (binding_ptr, binding_len) = voice::call_binding(binding)?;
        let rng = exchange::raw_rng(rng);
        let mut out = ptr::null_mut();
        // SAFETY: live store handle; NUL-terminated code; the binding valid
        // for its length (or NULL with 0); a live random source borrowed
        // exclusively (or NULL); out is a valid place.
        store.call_code(|raw| unsafe {
            sys::itsme_rollcall_new(raw, code.as_ptr(), binding_ptr, binding_len, rng, now, &mut out)
        })?;
        NonNull::new(out)
            .map(|raw| RollCall { raw, lock: Mutex::new(()) })
            .ok_or_else(|| Error::internal("itsme_rollcall_new succeeded without a handle"))
    }

    fn call<T>(&self, body: impl FnOnce(*mut sys::itsme_rollcall) -> std::result::Result<T, Failure>) -> Result<T> {
        locked_call(&self.lock, self.raw.as_ptr(), body)
    }

    fn call_code(&self, body: impl FnOnce(*mut sys::itsme_rollcall) -> i32) -> Result<()> {
        self.call(|raw| code_result(body(raw)))
    }

    /// Where the roll call stands; [`RollCallPhase::Expired`] from the first
    /// call with a time past the lifetime.
    pub fn phase(&self) -> Result<RollCallPhase> {
        let mut phase: sys::itsme_rollcall_phase = 0;
        // SAFETY: live handle; the output is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_rollcall_status(raw, &mut phase) })?;
        RollCallPhase::from_code(phase)
            .ok_or_else(|| Error::internal(format!("libitsme returned roll call phase {phase}, unknown to this binding")))
    }

    /// The relay group room's name: 32 lowercase hexadecimal digits, the
    /// same on every device for the same meeting code.
    pub fn room(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_ROOM_NAME_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_rollcall_room(raw, out, cap, len) }
            })
        })
    }

    /// The next message to send to the group room, removed from the queue;
    /// empty when there is none.  A VIEW is made when it is taken, from the
    /// state at that moment.
    pub fn next_outgoing(&mut self) -> Result<Vec<u8>> {
        self.call(|raw| {
            read_bytes(ROLLCALL_MESSAGE_MAX, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_rollcall_next_outgoing(raw, out, cap, len) }
            })
        })
    }

    /// The relay's "joined" event at `now`: this device's `slot`, and the
    /// slots of the `peers` already in the room (empty when alone).  Called
    /// at the first join and again after every reconnection (a new slot):
    /// the HELLO and a VIEW are queued, and the roll call goes on in its
    /// place.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a slot 0, a time out of
    /// range), [`ErrorKind::Expired`].
    pub fn joined(&mut self, slot: u16, peers: &[u16], now: i64) -> Result<()> {
        // Each slot in 2 bytes, big-endian, as in the relay's message prefix.
        let list: Vec<u8> = peers.iter().flat_map(|peer| peer.to_be_bytes()).collect();
        let list_ptr = if list.is_empty() { ptr::null() } else { list.as_ptr() };
        // SAFETY: live handle; the list valid for its length (or NULL with 0).
        self.call_code(|raw| unsafe { sys::itsme_rollcall_joined(raw, u32::from(slot), list_ptr, peers.len(), now) })
    }

    /// Feeds one message of the group room carried by relay slot `slot`
    /// (the relay's 2-byte prefix removed) at `now`.  A HELLO already held,
    /// an older VIEW or a SAID already taken is ignored.
    ///
    /// A refused message changes nothing: [`ErrorKind::MalformedMessage`]
    /// (not a roll-call message of this version, a second HELLO for one key
    /// or from one slot, a second SAID in a round, a SAID of the wrong size),
    /// [`ErrorKind::AuthenticationFailed`] (a signature that does not verify;
    /// or a contact's sealed code that does not open against the code
    /// typed: the participant is [`RollCallState::Refused`] for the round),
    /// [`ErrorKind::InvalidState`] (a VIEW or SAID from a participant not
    /// held or not present here, a VIEW carried by another slot than its
    /// sender's, a SAID of another roster), [`ErrorKind::InvalidKey`] (this
    /// device's own message reflected), [`ErrorKind::InvalidArgument`] (slot
    /// 0, a HELLO beyond the 100 held, a 51st participant),
    /// [`ErrorKind::Expired`], [`ErrorKind::Database`].
    pub fn receive(&mut self, bytes: &[u8], slot: u16, now: i64) -> Result<()> {
        // SAFETY: live handle; bytes valid for their length.
        self.call_code(|raw| unsafe {
            sys::itsme_rollcall_receive(raw, bytes.as_ptr(), bytes.len(), u32::from(slot), now)
        })
    }

    /// A text frame of the group room at `now`, as the relay sent it (one
    /// of its events): `joined`, `peer-joined` and `peer-left` are applied
    /// as [`RollCall::joined`], [`RollCall::peer_joined`] and
    /// [`RollCall::peer_left`] apply them, with their errors; `refused` and
    /// an event this version does not know change nothing. A host hands
    /// over what the room sends as it came (this and
    /// [`RollCall::room_binary`]) and parses nothing.
    ///
    /// Errors: [`ErrorKind::MalformedMessage`] (not a group room's event:
    /// nothing changes), then those of the event's method.
    pub fn room_text(&mut self, text: &[u8], now: i64) -> Result<()> {
        // SAFETY: live handle; text valid for its length.
        self.call_code(|raw| unsafe { sys::itsme_rollcall_room_text(raw, text.as_ptr(), text.len(), now) })
    }

    /// A binary frame of the group room at `now`, as the relay sent it: the
    /// sender's relay slot (2 bytes, big-endian), then its message, which is
    /// fed as [`RollCall::receive`] feeds it.
    ///
    /// Errors: [`ErrorKind::MalformedMessage`] (shorter than a slot:
    /// nothing changes), then those of [`RollCall::receive`].
    pub fn room_binary(&mut self, frame: &[u8], now: i64) -> Result<()> {
        // SAFETY: live handle; frame valid for its length.
        self.call_code(|raw| unsafe { sys::itsme_rollcall_room_binary(raw, frame.as_ptr(), frame.len(), now) })
    }

    /// The relay announced a new peer in `slot` at `now`: this device's
    /// HELLO is queued, since the newcomer has not seen it.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (slot 0, a time out of range),
    /// [`ErrorKind::Expired`].
    pub fn peer_joined(&mut self, slot: u16, now: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_rollcall_peer_joined(raw, u32::from(slot), now) })
    }

    /// The peer of `slot` left the room at `now`: its participant is no
    /// longer present (marked [`Participant::left`]; a new round), and comes
    /// back if it rejoins.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (slot 0, a time out of range),
    /// [`ErrorKind::Expired`].
    pub fn peer_left(&mut self, slot: u16, now: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_rollcall_peer_left(raw, u32::from(slot), now) })
    }

    /// Called about once a second: a VIEW that is due, and what may have
    /// been lost (docs/PROTOCOL.md 20.6), are queued; send them.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (a time out of range),
    /// [`ErrorKind::Expired`].
    pub fn tick(&mut self, now: i64) -> Result<()> {
        // SAFETY: live handle.
        self.call_code(|raw| unsafe { sys::itsme_rollcall_tick(raw, now) })
    }

    /// How many devices are present now, this one included (1 to 50): the
    /// head count to compare with the faces on the call.
    pub fn head_count(&self) -> Result<usize> {
        let mut count = 0usize;
        // SAFETY: live handle; count is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_rollcall_head_count(raw, &mut count) })?;
        Ok(count)
    }

    /// Whether the roster has not changed for 5 seconds while a present
    /// participant holds another one: someone (the relay) shows different
    /// participants to different devices.  Show it: a split that stays is
    /// not a slow network.
    pub fn split(&self) -> Result<bool> {
        let mut split = false;
        // SAFETY: live handle; split is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_rollcall_split(raw, &mut split) })?;
        Ok(split)
    }

    /// The hash of the roster held now: read it when showing the
    /// participants, and pass it to [`RollCall::confirm_roster`].
    pub fn roster(&self) -> Result<[u8; ROLLCALL_ROSTER_BYTES]> {
        let bytes = self.call(|raw| {
            read_bytes(ROLLCALL_ROSTER_BYTES, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_rollcall_roster(raw, out, cap, len) }
            })
        })?;
        bytes.try_into().map_err(|bytes: Vec<u8>| {
            Error::internal(format!("libitsme returned a roster of {} bytes", bytes.len()))
        })
    }

    /// The owner confirmed that the contacts listed are on their call:
    /// `roster` is the [`RollCall::roster`] read when the list was shown.
    /// Draws this round's code from `rng` (`None`: the operating system).
    ///
    /// Errors: [`ErrorKind::InvalidState`] (no one else is present yet; the
    /// roster changed since: show the participants again; or it is confirmed
    /// already in this round),
    /// [`ErrorKind::InvalidArgument`] (not [`ROLLCALL_ROSTER_BYTES`] long),
    /// [`ErrorKind::Expired`].
    pub fn confirm_roster(&mut self, roster: &[u8], now: i64, rng: Option<&mut DeterministicRandom>) -> Result<()> {
        let rng = exchange::raw_rng(rng);
        // SAFETY: live handle; the roster valid for its length; a live random
        // source borrowed exclusively (or NULL).
        self.call_code(|raw| unsafe {
            sys::itsme_rollcall_confirm_roster(raw, roster.as_ptr(), roster.len(), rng, now)
        })
    }

    /// This device's code for this round, to read aloud ("ECHO 042"), once
    /// the roster is confirmed.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (not confirmed, or expired).
    pub fn code(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_VOICE_CODE_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_rollcall_code(raw, out, cap, len) }
            })
        })
    }

    /// The owner read [`RollCall::code`] aloud: the SAID, with the code
    /// sealed for each contact present, is queued
    /// ([`RollCall::next_outgoing`]); the entries of the others are drawn
    /// from `rng` (`None`: the operating system).  Nothing derived from the
    /// code leaves the device before.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (the roster is not confirmed, or
    /// this round's SAID went out), [`ErrorKind::Expired`].
    pub fn confirm_said(&mut self, now: i64, rng: Option<&mut DeterministicRandom>) -> Result<()> {
        let rng = exchange::raw_rng(rng);
        // SAFETY: live handle; a live random source borrowed exclusively (or
        // NULL).
        self.call_code(|raw| unsafe { sys::itsme_rollcall_confirm_said(raw, rng, now) })
    }

    /// Participant `index` (0, this device, to the count less one).
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (out of range).
    pub fn participant(&self, index: usize) -> Result<Participant> {
        self.call(|raw| participant_of(raw, index))
    }

    /// Every device ever present in the roll call, this one first (those
    /// that left among them: [`Participant::left`]).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.call(|raw| {
            let mut count = 0usize;
            // SAFETY: live handle; count is a valid place.
            code_result(unsafe { sys::itsme_rollcall_participant_count(raw, &mut count) })?;
            (0..count).map(|index| participant_of(raw, index)).collect()
        })
    }

    /// The owner typed `code` ("ECHO 042", the word in any case), the code
    /// participant `index` read aloud, at `now`.  Compared at once if their
    /// sealed code is in, else when it arrives; the outcome is recorded on
    /// the contact.  Returns the participant's state
    /// ([`RollCallState::NotYet`] while their sealed code is to come,
    /// [`RollCallState::Wrong`]: type again).
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (not a NATO word and three
    /// digits, no such participant, this device), [`ErrorKind::InvalidState`]
    /// (the roster of this round is not confirmed; not a contact, or not
    /// present now; checked already), [`ErrorKind::Locked`] (three wrong
    /// codes in this round),
    /// [`ErrorKind::AuthenticationFailed`] (their sealed code does not open:
    /// [`RollCallState::Refused`]), [`ErrorKind::Expired`].
    pub fn enter_heard(&mut self, index: usize, code: &str, now: i64) -> Result<RollCallState> {
        let code = CText::arg(code, "the code")?;
        self.call(|raw| {
            let mut state: sys::itsme_rollcall_state = 0;
            // SAFETY: live handle; NUL-terminated code; state is a valid place.
            code_result(unsafe { sys::itsme_rollcall_enter_heard(raw, index, code.as_ptr(), now, &mut state) })?;
            RollCallState::read(state)
        })
    }
}

/// Reads participant `index` of a live handle.
fn participant_of(raw: *mut sys::itsme_rollcall, index: usize) -> std::result::Result<Participant, Failure> {
    let mut info = sys::itsme_rollcall_participant_info::default();
    // SAFETY: live handle; info is a valid place whose size is set.
    code_result(unsafe { sys::itsme_rollcall_participant(raw, index, &mut info) })?;
    let slot = u16::try_from(info.slot)
        .map_err(|_| Failure::Binding(Error::internal(format!("libitsme returned slot {}", info.slot))))?;
    Ok(Participant {
        index: info.index,
        slot: (slot != 0).then_some(slot),
        contact_id: (info.contact_id != 0).then_some(info.contact_id),
        state: RollCallState::read(info.state)?,
        left: info.left,
        agrees: info.agrees,
    })
}

impl Drop for RollCall {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_rollcall_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for RollCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RollCall").field("raw", &self.raw).finish()
    }
}

impl ContactStore {
    /// Test build only (include/itsme_testing.h): stores the device secrets
    /// of contact `id` as an exchange leaves them, this device's for the
    /// contact (`mine`) and the contact's (`theirs`), each at most 64 bytes,
    /// not both empty.  They replace the contact's secrets.  For tests and
    /// vectors that rebuild a store holding given secrets.
    ///
    /// Errors: [`ErrorKind::TestBuildRequired`] against a release library,
    /// [`ErrorKind::InvalidArgument`], [`ErrorKind::NotFound`],
    /// [`ErrorKind::Database`].
    pub fn set_device_secrets(&self, id: i64, mine: &[u8], theirs: &[u8]) -> Result<()> {
        test_build("itsme_store_set_device_secrets")?;
        // SAFETY: live store handle; both secrets valid for their lengths.
        self.call_code(|raw| unsafe {
            sys::itsme_store_set_device_secrets(raw, id, mine.as_ptr(), mine.len(), theirs.as_ptr(), theirs.len())
        })
    }
}
