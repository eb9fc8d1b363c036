import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// Security PIN Update (docs/PROTOCOL.md section 10.3): two people together
/// replace the device secrets of their contact with fresh ones over the
/// host's Bluetooth, restoring a degraded contact.
///
/// The driver of `PinUpdateMachine`: it writes the new secrets to the store
/// when the machine asks (pending, then committed, each before the frame
/// that follows it), so an interruption at any point leaves both sides able
/// to verify; and keeps the frames until the host takes them.
///
/// A failure is final. Not thread-safe: serialise calls (the C layer does).
public final class PinUpdate: CustomStringConvertible {
    /// Where the update stands. The raw values are the C interface's.
    public enum State: UInt32, Sendable {
        /// Frames are still to be exchanged.
        case running = 1
        /// This side has committed its new secret; nothing more to do
        /// (the initiator may still have DONE to send).
        case done = 2
        /// A step failed (a bad frame, the lifetime passed): final; `failure` says why.
        case failed = 3
    }

    /// How long an update may take, from its creation, in seconds.
    public static let lifetime = WindowedSession.lifetime

    private let store: ContactStore
    private let driver: Driver<PinUpdateMachine>
    private var machine: PinUpdateMachine { driver.machine }

    /// The contact whose device secrets are replaced.
    public var contactID: Int64 { machine.session.contactID }
    /// The window the update meets in (30-second windows of Unix time).
    public var window: Int64 { machine.session.window }
    /// The code both devices show, so the two people know their devices
    /// found each other (from the seed and the window).
    public var sessionCode: ShortCode { machine.sessionCode }
    /// True for the side whose identity key sorts first: it sends DONE.
    public var isInitiator: Bool { machine.session.isInitiator }
    /// When the update was created, in Unix seconds.
    public var createdAt: Int64 { machine.session.createdAt }
    /// Why the update failed, once it has.
    public var failure: ItsMeError? { machine.failure }
    /// Where the update stands.
    public var state: State {
        switch machine.state {
        case .sentKey, .awaitingNew, .sentNew: .running
        case .done: .done
        case .failed: .failed
        }
    }

    /// The session code both devices show, from the seed and the window.
    package static func sessionCode<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64) throws -> ShortCode {
        try PinUpdateMachine.sessionCode(seed: seed, window: window)
    }

    /// An update with contact `contactID` in `window` (the current one or
    /// the one before, as for Online Verify). Throws `.invalidArgument` for
    /// a window that is neither, `.notFound` for an unknown contact,
    /// `.invalidState` for a contact still awaiting the peer, or the
    /// store's errors.
    public init<R: RandomSource>(store: ContactStore, contactID: Int64, window: Int64, now: Int64, random: inout R) throws {
        let contact = try store.contact(id: contactID)
        let (machine, actions) = try PinUpdateMachine.start(
            contact: contact, window: window, now: now, seed: SecretBox(try store.seed(id: contactID)),
            myPID: store.ownerPublicKey, random: &random)
        self.store = store
        driver = try Driver(machine, actions: actions, write: store.writer(now: now))
    }

    public var description: String { "PinUpdate(contact: \(contactID), state: \(state))" }

    /// The next frame to send over the host's Bluetooth link, left in the
    /// queue; nil if none (and once the update failed).
    public func peekOutgoing() -> [UInt8]? { driver.nextOutgoing }
    /// Removes the frame `peekOutgoing` gave (it was handed to the link).
    public func markSent() { driver.markSent() }

    /// Feeds one frame from the peer, and makes the store writes it leads
    /// to, in the order PROTOCOL.md 10.3 gives, before the frame that
    /// follows them is queued. A write that fails leaves the update as it
    /// was: feed the same frame again.
    public func receive(_ frame: [UInt8], now: Int64) throws {
        try driver.step({ ((), try $0.receive(frame, now: now)) }, write: store.writer(now: now))
    }
}
