import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// Online Verify (docs/PROTOCOL.md section 11): the two devices prove to
/// each other, through a two-party relay room, that each holds the seed,
/// and check each other's device tag inside the encrypted session.
///
/// The driver of `OnlineVerifyMachine`: it reads what the machine needs from
/// the contact store, keeps the messages the machine asks to send until the
/// host takes them, and makes the store writes the machine asks for. Every
/// rule about which state allows what is the machine's; the C layer and the
/// Swift API both go through this type.
///
/// A failure is final. Not thread-safe: serialise calls (the C layer does).
public final class OnlineVerify: CustomStringConvertible {
    /// Where the session stands. The raw values are the C interface's.
    public enum State: UInt32, Sendable {
        /// Messages are still to be exchanged.
        case running = 1
        /// Both proofs checked: show the SAS for the two to read aloud.
        case compareSAS = 2
        /// This side confirmed the SAS: the contact is verified (or degraded, if the
        /// device tag showed a changed device).
        case confirmed = 3
        /// This side said the SAS differs: nothing stored changed.
        case rejected = 4
        /// A step failed (a bad message, the lifetime passed): final; `failure`
        /// says why.
        case failed = 5
        /// The peer's device proved it holds the seed, but one of the two
        /// sessions is bound to a call and the other is not (PROTOCOL.md
        /// 11.4): final, nothing recorded. Verify with both bound, or neither.
        case bindingDiffers = 6
        /// The peer's device proved it holds the seed, but it is bound to
        /// another call than this one (11.4): final, nothing recorded. The
        /// person on this call may not be the contact: someone may be
        /// relaying between two calls.
        case otherCall = 7
    }

    /// How long a session may take, from its creation.
    package static let lifetime = WindowedSession.lifetime

    private let store: ContactStore
    private let driver: Driver<OnlineVerifyMachine>
    private var machine: OnlineVerifyMachine { driver.machine }

    /// The contact being verified.
    package var contactID: Int64 { machine.session.contactID }
    /// The window the session meets in (30-second windows of Unix time).
    public var window: Int64 { machine.session.window }
    /// 16 bytes; the relay room's name is its lowercase hex.
    public var roomID: [UInt8] { machine.roomID }
    /// The relay room's name: `roomID` as 32 lowercase hex digits.
    public var roomName: String { Hex.encodeUpper(machine.roomID).lowercased() }
    package var isInitiator: Bool { machine.session.isInitiator }
    /// When the session was created, in Unix seconds.
    package var createdAt: Int64 { machine.session.createdAt }
    /// Why the session failed, once it has.
    public var failure: ItsMeError? { machine.failure }
    /// The SAS, once both proofs are checked (and after a rejection that
    /// followed them); nil before, and once the session failed.
    public var sas: ShortCode? { machine.sas }

    /// The SAS, or `.invalidState` saying why there is none.
    package func requireSAS() throws -> ShortCode {
        guard let sas else { throw ItsMeError(.invalidState, "there is no SAS (the session is \(state))") }
        return sas
    }
    /// The outcome of the device tag check, known once proofs are checked.
    package var outcome: VoiceSession.Outcome? { machine.outcome }

    /// Where the session stands.
    public var state: State {
        switch machine.state {
        case .sentCommit, .awaitingCommit, .sentKey, .awaitingProof: .running
        case .comparingSAS: .compareSAS
        case .confirmed: .confirmed
        case .rejected: .rejected
        case .bindingDiffers(let otherCall): otherCall ? .otherCall : .bindingDiffers
        case .failed: .failed
        }
    }

    /// The 16-byte room ID two contacts sharing `seed` meet in during `window`,
    /// without a session. Throws `.invalidArgument` for a window out of range.
    package static func roomID<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64) throws -> [UInt8] {
        try OnlineVerifyMachine.roomID(seed: seed, window: window)
    }

    /// A session with contact `contactID` in the room of `window`, which
    /// must be the current window or the one before (a host that finds no
    /// peer in the current room tries the previous one). A host that embeds
    /// ItsMe in its own call passes the call's `binding` (16 to 64 bytes
    /// both devices hold, PROTOCOL.md 11.4): a peer bound differently then
    /// ends the session as `.bindingDiffers` or `.otherCall`, never as an
    /// impostor, and a session relayed between two calls verifies nobody.
    /// Throws `.invalidArgument` for a window that is neither or a binding
    /// of another length, `.notFound` for an unknown contact,
    /// `.invalidState` for a contact still awaiting the peer, or the store's
    /// errors.
    package init<R: RandomSource>(
        store: ContactStore, contactID: Int64, window: Int64, binding: [UInt8]? = nil, now: Int64, random: inout R
    ) throws {
        let binding = try CallBinding.box(binding)
        let contact = try store.contact(id: contactID)
        let (machine, actions) = try OnlineVerifyMachine.start(
            contact: contact, window: window, now: now, seed: SecretBox(try store.seed(id: contactID)),
            myPID: store.ownerPublicKey, tagSecrets: try store.tagSecrets(id: contactID), binding: binding, random: &random)
        self.store = store
        driver = try Driver(machine, actions: actions, write: store.writer(now: now))
    }

    public var description: String { "OnlineVerify(contact: \(contactID), state: \(state))" }

    /// The next message to send, left in the queue; nil if none.
    public func peekOutgoing() -> [UInt8]? { driver.nextOutgoing }

    /// Removes the message `peekOutgoing` gave (it was handed to the relay).
    public func markSent() { driver.markSent() }

    /// The next message to send, removed from the queue; nil if none.
    package func takeOutgoing() -> [UInt8]? {
        defer { markSent() }
        return peekOutgoing()
    }

    /// Feeds one message from the peer.
    /// Throws `.malformedMessage`, `.invalidKey`, `.authenticationFailed` or
    /// `.expired` for a message that does not fit (the session fails then), or the
    /// store's error if a write fails (the session is as it was).
    public func receive(_ message: [UInt8], now: Int64) throws {
        try driver.step({ ((), try $0.receive(message, now: now)) }, write: store.writer(now: now))
    }

    /// Sends the reference of our profile record (record ID || record key,
    /// PROTOCOL.md 18.3) inside our PROOF, encrypted for the peer. Only
    /// before the PROOF is made (before the peer's KEY is received); again
    /// replaces it.
    /// The reference is copied into guarded memory; the caller keeps its own.
    /// Throws `.invalidArgument` for a reference that is not 32 bytes,
    /// `.invalidState` once the PROOF is made.
    public func shareProfile<Ref: ByteView & ~Copyable>(reference: borrowing Ref) throws {
        guard reference.withBytes({ $0.count }) == ProfileRecord.referenceCount else {
            throw ItsMeError(.invalidArgument, "a profile reference is \(ProfileRecord.referenceCount) bytes")
        }
        let box = try SecretBox(copying: reference)
        try driver.plainStep { try $0.shareProfile(box) }
    }

    /// The profile reference the peer sent in its PROOF, once the person has
    /// confirmed the SAS; `.notFound` if the peer sent none.
    public func peerProfileReference() throws -> SecretBytes {
        try machine.peerProfileReference().bytes.copy()
    }

    /// The two people read the SAS aloud and it matched: records the
    /// outcome on the contact (as voice verification does, PROTOCOL.md
    /// 10.1) and returns it. If the write fails, nothing changes and the
    /// call may be repeated.
    @discardableResult
    public func confirm(now: Int64) throws -> VoiceSession.Outcome {
        try driver.step({ try $0.confirm(now: now) }, write: store.writer(now: now))
    }

    /// The SAS differed: nothing is recorded.
    /// Throws `.invalidState` unless the SAS is being compared.
    public func reject() throws {
        try driver.plainStep { try $0.reject() }
    }
}
