import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// One voice verification with a stored contact (docs/PROTOCOL.md sections
/// 9 and 10), driven by the current time and by what the two people say
/// and enter.
///
///     waiting --start--> selecting --select x2--> comparing --check--> finished
///
/// Any state can end in `failed`: a word that is not the selector's, a
/// window that ran out. A failure is final; calls in the wrong order get
/// `.invalidState` and change nothing.
///
/// The driver of `VoiceMachine`: it reads what the machine needs from the
/// contact store and makes the writes the machine asks for (the window's
/// use, the outcome). Every rule about which state allows what is the
/// machine's; the C layer and the Swift API both go through this type.
///
/// Not thread-safe: serialise calls on one instance (the C layer does).
public final class VoiceSession: CustomStringConvertible {
    /// Where the session stands. The raw values are the C interface's.
    public enum State: UInt32, Sendable {
        /// Planned: waiting for the window to begin (`startsIn`).
        case waiting = 1
        /// Started (the window is used): the two selections.
        case selecting = 2
        /// Codes ready: read yours aloud, enter what you heard.
        case comparing = 3
        /// `check` ran: `outcome` says what it found.
        case finished = 4
        /// A step failed (a word not offered, the window ran out): final; `failure`
        /// says why.
        case failed = 5
    }

    /// Whose word is chosen next. The raw values are the C interface's.
    public enum Turn: UInt32, Sendable {
        /// Nobody's: the session is not selecting.
        case none = 0
        /// This person picks one of `myWords` and says it; `select` it.
        case mine = 1
        /// The other person says a word; `select` the word heard.
        case theirs = 2
    }

    /// What `check` found (PROTOCOL.md 10.1).
    public typealias Outcome = VerificationOutcome

    private let store: ContactStore
    private let driver: Driver<VoiceMachine>
    private var machine: VoiceMachine { driver.machine }

    /// The contact being verified.
    package var contactID: Int64 { machine.plan.contactID }
    /// The window the session runs in (30-second windows of Unix time).
    package var window: Int64 { machine.plan.window }
    /// Section 9.2, as its value (text: `sessionIDText`).
    package var sessionID: UInt32 { machine.plan.sessionID }
    /// This person's five word indices, sorted.
    public var myWords: [Int] { machine.plan.myWords }
    package var iSelectFirst: Bool { machine.plan.iSelectFirst }
    /// Where the session stands.
    public var state: State {
        switch machine.state {
        case .waiting: .waiting
        case .selecting: .selecting
        case .comparing: .comparing
        case .finished: .finished
        case .failed: .failed
        }
    }
    /// What `check` found, once it ran.
    package var outcome: Outcome? { machine.outcome }
    /// Why the session failed, once it has.
    public var failure: ItsMeError? { machine.failure }
    package var selections: [Int] { machine.selections }
    /// The codes and tags, while comparing and once finished (nil before,
    /// and once the session failed).
    public var yourCode: UInt32? { machine.codes?.yourCode }
    /// This device's two-digit tag, to read aloud after `yourCode`.
    public var yourTag: UInt32? { machine.codes?.yourTag }
    /// The code the other person should say (the screen does not show it: the
    /// person enters what was heard and `check` compares).
    public var theirCode: UInt32? { machine.codes?.theirCode }
    /// The tag the peer is expected to say, as the screen shows it
    /// (PROTOCOL.md 10.3): of its new secret once this side has committed a
    /// Security PIN Update, else of its current one. nil when this device
    /// holds no secret of the peer's to show.
    public var theirTag: UInt32? { machine.codes?.theirTag }

    /// The session ID both screens show, a NATO word and two digits, so the two
    /// people know they are in the same session.
    public var sessionIDText: String { VoiceProtocol.sessionIDText(sessionID) }
    package var lastMoment: Int64 { machine.plan.lastMoment }

    /// Plans a session with contact `contactID` at `now`: fixes the window
    /// (the next one after `now` and after the last one used). A host that
    /// embeds ItsMe in its own call passes the call's `binding` (16 to 64
    /// bytes both people's devices hold, PROTOCOL.md 9.7): the session ID
    /// and the codes take it, so a session relayed between two calls fails,
    /// and a device bound differently reads another session ID. Show beside
    /// the session ID that it is bound.
    /// Throws `.invalidArgument` for a time out of range or a binding of
    /// another length, `.notFound` for an unknown contact, `.invalidState`
    /// for a contact still awaiting the peer, or the store's errors.
    public init(store: ContactStore, contactID: Int64, binding: [UInt8]? = nil, now: Int64) throws {
        let binding = try CallBinding.box(binding)
        let contact = try store.contact(id: contactID)
        let machine = try VoiceMachine(
            contact: contact, now: now, seed: SecretBox(try store.seed(id: contactID)), myPID: store.ownerPublicKey,
            tagSecrets: try store.tagSecrets(id: contactID), binding: binding)
        self.store = store
        driver = try Driver(machine)
    }

    /// Whether the session is bound to the host's call (9.7).
    public var isBound: Bool { machine.plan.binding != nil }

    public var description: String { "VoiceSession(contact: \(contactID), window: \(window), state: \(state))" }

    /// Seconds until the window begins (negative once it has).
    public func startsIn(now: Int64) -> Int64 { machine.plan.startsIn(now: now) }

    /// Starts the session when its window begins (up to 15 s early by this
    /// clock): uses the window for the contact, atomically in the store.
    /// `.windowUsed` if another session took it (the session fails);
    /// `.invalidState` if it is too early.
    public func start(now: Int64) throws {
        try driver.step({ ((), try $0.start(now: now)) }, write: store.writer(now: now))
    }

    /// Whose word comes next.
    public var turn: Turn { machine.turn }

    /// Enters the next selection: on my turn one of `myWords`; on theirs
    /// the word I heard, from all 26. A heard word that is not among
    /// theirs ends the session (`.authenticationFailed`), with no retry.
    public func select(_ word: Int, now: Int64) throws {
        try driver.plainStep { try $0.select(word, now: now) }
    }

    /// Checks what I heard: their code ("ECHO 512") and tag (0-99), in
    /// constant time, and records the outcome on the contact (PROTOCOL.md
    /// 10.1). A code that does not parse is `.invalidArgument` and changes
    /// nothing.
    @discardableResult
    public func check(heardCode: String, heardTag: UInt32, now: Int64) throws -> Outcome {
        try driver.step({ try $0.check(heardCode: heardCode, heardTag: heardTag, now: now) }, write: store.writer(now: now))
    }
}
