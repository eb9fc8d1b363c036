import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The live device transfer (docs/PROTOCOL.md 17.3): the new device shows a
/// one-time X25519 key as a QR code; the old device scans it and answers
/// with its own key; both show a SAS the person compares; only after the
/// person confirms on the old device does it send the identity, sealed to
/// the new device's key, and the contact store if the old device includes
/// it (`include(contactStore:)`), in chunks. No password. The host carries the messages (the
/// relay room named by `roomName`, or any other link), one way, from the
/// old device to the new one.
///
/// The driver of `DeviceTransferMachine`: it checks the sender's PIN and
/// reads its identity before the machine is made, and keeps the outbox.
/// Every rule about which state allows what is the machine's.
///
/// A failure is final. Not thread-safe: serialise calls (the C layer does).
public final class DeviceTransfer: CustomStringConvertible {
    /// Which device this side is. The raw values are the C interface's.
    package enum Role: UInt32, Sendable {
        /// The new device: shows the offer, receives the identity.
        case receiver = 1
        /// The old device: scans the offer, sends the identity.
        case sender = 2
    }

    /// Where the transfer stands. The raw values are the C interface's.
    public enum State: UInt32, Sendable {
        /// The receiver waits for the sender's key.
        case awaitingPeer = 1
        /// Both keys known: show the SAS for the person to compare.
        case compareSAS = 2
        /// The receiver's person confirmed; the identity has not arrived yet.
        case awaitingIdentity = 3
        /// Sender: the identity is queued. Receiver: it is ready to install.
        case done = 4
        /// The person said the SAS differs (on either device): nothing was sent or
        /// installed.
        case rejected = 5
        /// A step failed (a bad message, an expired transfer): final; `failure` says
        /// why.
        case failed = 6
    }

    /// The version of the transfer's offer and messages.
    package static let version: UInt8 = 2
    /// The longest message a transfer sends: a store message of a whole
    /// 32 KiB chunk (PROTOCOL.md 17.3).
    public static let maxMessageCount = TransferMessage.storeCounts.upperBound
    /// How the new device's offer text (`offerText`, its QR code) begins.
    public static let offerPrefix = TransferOffer.prefix
    /// How long a transfer may take, from its creation.
    public static let lifetime: Int64 = 600

    private let driver: Driver<DeviceTransferMachine>
    private var machine: DeviceTransferMachine { driver.machine }
    /// The sending identity's public key (sender only): the contact store
    /// it includes must be that identity's.
    package private(set) var senderPublicKey: [UInt8]?

    /// Which device this side is.
    package var role: Role { machine.role }
    /// When the transfer was created, in Unix seconds.
    package var createdAt: Int64 { machine.createdAt }
    /// Why the transfer failed, once it has.
    package var failure: ItsMeError? { machine.failure }
    /// The SAS, once both keys are known (and after the transfer ended
    /// other than by failing).
    public var sas: ShortCode? { machine.sas }

    /// The SAS, or `.invalidState` saying why there is none.
    package func requireSAS() throws -> ShortCode {
        guard let sas else { throw ItsMeError(.invalidState, "there is no SAS (the transfer is \(state))") }
        return sas
    }
    /// The relay room: lowercase hex of 16 bytes derived from the transfer id.
    public var roomName: String { machine.offer.roomName }
    /// The offer text (as the receiver shows it, or as the sender scanned it).
    public var offerText: String { machine.offer.text }
    /// Where the transfer stands.
    public var state: State {
        switch machine.state {
        case .awaitingKey: .awaitingPeer
        case .receiverComparing, .senderComparing: .compareSAS
        case .awaitingIdentity, .awaitingStore: .awaitingIdentity
        case .received, .sent: .done
        case .rejected: .rejected
        case .failed: .failed
        }
    }

    public var description: String { "DeviceTransfer(role: \(role), state: \(state))" }

    /// The new device's side: draws the one-time key and the transfer id.
    /// Throws `.invalidArgument` for a time out of range.
    public init<R: RandomSource>(receiverAt now: Int64, random: inout R) throws {
        driver = try Driver(try DeviceTransferMachine.receiver(now: now, random: &random))
    }

    /// The old device's side: reads the offer the new device shows (one
    /// that does not parse costs no attempt), then checks the PIN at `now`
    /// (a counted attempt) and queues its key. The SAS is known at once.
    ///
    /// Throws `.malformedMessage` for an offer that does not parse, then what
    /// `PIN.verify` throws (`.invalidPIN`, `.notFound`, `.locked`, `.wrongPIN`),
    /// `.expired` for an offer past its lifetime, or the secret store's error.
    /// The identity's secrets go only into the sealed message, in guarded memory.
    public init<R: RandomSource>(
        sending identity: Identity, pin: String, offer: String, now: Int64, random: inout R
    ) throws {
        try UnixTime.check(now)
        let offer = try TransferOffer(parsing: offer)
        try PIN(store: identity.store).verify(pin, now: now)
        let (machine, key) = try DeviceTransferMachine.sender(
            offer: offer, contents: SecretBox(try identity.exportContents()), now: now, random: &random)
        driver = try Driver(machine, actions: [.send(key)], write: Self.noWrites)
        senderPublicKey = identity.publicKey
    }

    /// An offer as the new device shows it, checked (`.malformedMessage`
    /// if it is not one), without the white space around it: a host can
    /// refuse a mistyped code before asking for the PIN.
    public static func checkOffer(_ text: String) throws -> String { try TransferOffer(parsing: text).text }

    /// Sender, before the confirmation: sends the contact store too, after
    /// the identity (`ContactStore.snapshot`). Throws `.invalidArgument` for
    /// a store over 64 MiB or not a SQLite file, `.invalidState` on the
    /// receiver or once confirmed (nothing changes).
    public func include(contactStore: [UInt8]) throws {
        try driver.plainStep { try $0.include(store: contactStore) }
    }

    // MARK: Messages

    /// The next message to send, removed from the queue; nil if none.
    public func takeOutgoing() -> [UInt8]? {
        defer { driver.markSent() }
        return driver.nextOutgoing
    }

    /// The next message to send, left in the queue; nil if none.
    public func peekOutgoing() -> [UInt8]? { driver.nextOutgoing }

    /// A transfer writes to no store: the receiver's host installs what
    /// came (`IdentityExport.install`).
    private static func noWrites(_ action: Action, _ machine: inout DeviceTransferMachine) throws {
        throw ItsMeError(.internal, "a device transfer makes no write")
    }

    /// Feeds one message from the old device (receiver only).
    /// Throws `.malformedMessage`, `.authenticationFailed` or `.expired` for a
    /// message that does not fit (the transfer fails then); `.invalidState` if
    /// this side expects no message (nothing changes).
    public func receive(_ message: [UInt8], now: Int64) throws {
        try driver.plainStep { try $0.receive(message, now: now) }
    }

    // MARK: The person's decision

    /// The SAS matched. Sender: queues the sealed identity and, if included,
    /// the contact store's messages. Receiver: opens what has arrived (else
    /// waits for it).
    /// Throws `.invalidState` when there is no SAS to confirm, `.expired` past
    /// the lifetime (the transfer fails then).
    public func confirm(now: Int64) throws {
        try driver.step({ ((), try $0.confirm(now: now)) }, write: Self.noWrites)
    }

    /// The SAS differed, or the person gave up: nothing is sent or kept.
    /// Throws `.invalidState` once the transfer ended.
    public func reject() throws {
        try driver.step({ ((), try $0.reject()) }, write: Self.noWrites)
    }

    /// The received identity, once `done` (receiver only), handed over once,
    /// with the contact store if one came (`Contents.contactStore`); install
    /// it with `IdentityExport.install`.
    public func takeIdentity() throws -> IdentityExport.Contents {
        let (contents, store) = try driver.plainStep { try $0.takeIdentity() }
        var taken = try IdentityExport.Contents(contents.bytes)
        taken.contactStore = store
        return taken
    }
}
