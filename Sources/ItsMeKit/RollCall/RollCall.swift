/// A roll call (docs/PROTOCOL.md section 20): everyone on a call checks, in
/// one round, which participants are contacts whose devices hold the seed
/// they exchanged, by codes read aloud and sealed per contact.
///
/// The driver of `RollCallMachine`: it reads the contacts' seeds and device
/// secrets from the store once, keeps the messages to send to the group
/// room (PROTOCOL.md 15.9) until the host takes them, and records each
/// check's outcome on its contact, as Online Verify does. Every rule is the
/// machine's; the C layer and the Swift API both go through this type.
///
/// The host joins the relay's group room `roomName`, sends what
/// `takeOutgoing` gives (first this device's HELLO), feeds every message
/// of the room with the slot it came from (`receive`), and reports slots
/// that left (`peerLeft`). It shows `participants` to its owner, who
/// confirms that the contacts listed are on the call (`confirmRoster`, with
/// the `rosterHash` shown), reads `myCode` aloud, says so (`confirmSaid`),
/// and types the code each contact read (`enterHeard`). A new participant
/// starts a new round: the owner confirms the new roster and reads a new
/// code; checks already made stay.
///
/// Not thread-safe: serialise calls (the C layer does).
public final class RollCall: CustomStringConvertible {
    /// Where the roll call stands on this device. The raw values are the C interface's.
    public enum Phase: UInt32, Sendable {
        /// Participants arrive; the roster of this round is not confirmed.
        case gathering = 1
        /// The roster is confirmed: read `myCode` aloud, then `confirmSaid`.
        case confirmed = 2
        /// This device's code went out for this round.
        case said = 3
        /// The lifetime (10 minutes) passed: final.
        case expired = 4
    }

    /// A participant's state as shown beside it. The raw values are the C interface's.
    public enum ParticipantState: UInt32, Sendable {
        /// A contact whose code is not checked yet.
        case notYet = 1
        /// The code heard is the one their device sealed, and the device is the one known.
        case verified = 2
        /// The code heard is not the one their device sealed.
        case wrong = 3
        /// The code matched, from a device other than the one known: their device changed.
        case deviceChanged = 4
        /// The code matched; no device secret of theirs is known here to check the device.
        case verifiedTagUnchecked = 5
        /// Their sealed code did not open (tampered with): neither verified nor wrong.
        case refused = 6
        /// A device that holds no seed with this one: not a contact.
        case unknown = 7
    }

    /// One device in the roll call, as this device sees it.
    public struct Participant: Sendable, Equatable {
        /// 0 for this device; others in the order they arrived.
        public let index: Int
        /// The relay slot it speaks from (nil for this device).
        public let slot: Int?
        /// The contact it is (nil: unknown, or this device).
        public let contactID: Int64?
        /// What to show beside it: `.unknown` for this device and for one that is not a contact.
        public let state: ParticipantState
        /// It left the room (it stays in the roster).
        public let left: Bool
    }

    /// A roll call lasts this long on a device, from its creation.
    public static let lifetime = RollCallProtocol.lifetime
    /// The most devices in one roll call, this one included.
    public static let maxParticipants = RollCallProtocol.maxParticipants
    /// The most contacts a device takes into a roll call.
    public static let maxContacts = RollCallProtocol.maxTags

    private let store: ContactStore
    private var machine: RollCallMachine
    private var outbox: [[UInt8]] = []

    /// A roll call named by `meetingCode`, with every settled contact of
    /// `store`. The random source gives the HELLO's nonce and padding.
    /// Throws `.invalidArgument` for more than `maxContacts` contacts or a
    /// time out of range, or the store's errors.
    public init<R: RandomSource>(store: ContactStore, meetingCode: RemoteCode, now: Int64, random: inout R) throws {
        var members: [RollCallMachine.Member] = []
        for contact in try store.list() where contact.state != .awaitingPeer {
            members.append(
                RollCallMachine.Member(
                    contactID: contact.id, pid: contact.pid, seed: SecretBox(try store.seed(id: contact.id)),
                    tagSecrets: try store.tagSecrets(id: contact.id)))
        }
        let (machine, actions) = try RollCallMachine.start(
            meetingCode: meetingCode, members: members, myPID: store.ownerPublicKey, now: now, random: &random)
        self.store = store
        self.machine = machine
        try store.perform(actions, now: now) { outbox.append($0) }
    }

    public var description: String { "RollCall(participants: \(machine.participants.count), phase: \(phase))" }

    /// The relay group room's name: 32 lowercase hex digits.
    public var roomName: String { Hex.encodeUpper(machine.roomID).lowercased() }

    /// When the roll call was created, in Unix seconds.
    public var createdAt: Int64 { machine.createdAt }

    /// Where the roll call stands; `.expired` from the first call with a time past the lifetime.
    public var phase: Phase {
        switch machine.phase {
        case .gathering: .gathering
        case .confirmed: .confirmed
        case .said: .said
        case .expired: .expired
        }
    }

    /// The hash of the roster as shown now (32 bytes): pass it to
    /// `confirmRoster` with the list the owner saw.
    public var rosterHash: [UInt8] { machine.rosterHash }

    /// This device's code for this round, to read aloud ("ECHO 042"), once
    /// the roster is confirmed.
    public var myCode: String? { machine.myCode.map(VoiceProtocol.codeText) }

    /// Every device in the roll call, this one first.
    public var participants: [Participant] {
        machine.participants.enumerated().map { index, p in
            let contactID = p.member.map { machine.members[$0].contactID }
            let state: ParticipantState
            if index == 0 || p.member == nil {
                state = .unknown
            } else {
                switch p.check {
                case .notYet: state = .notYet
                case .verified: state = .verified
                case .wrong: state = .wrong
                case .deviceChanged: state = .deviceChanged
                case .verifiedTagUnchecked: state = .verifiedTagUnchecked
                case .refused: state = .refused
                }
            }
            return Participant(index: index, slot: p.slot, contactID: contactID, state: state, left: p.left)
        }
    }

    /// The next message to send to the group room, left in the queue; nil if none.
    public func peekOutgoing() -> [UInt8]? { outbox.first }

    /// Removes the message `peekOutgoing` gave (it was handed to the relay).
    public func markSent() {
        if !outbox.isEmpty { outbox.removeFirst() }
    }

    /// The next message to send, removed from the queue; nil if none.
    public func takeOutgoing() -> [UInt8]? {
        defer { markSent() }
        return peekOutgoing()
    }

    /// Feeds one message of the group room, from relay slot `slot` (the
    /// relay's 2-byte prefix removed). A message that does not fit throws
    /// and changes nothing: `.malformedMessage`, `.invalidArgument` (out of
    /// time, too many participants), `.invalidState` (another round's,
    /// an unknown speaker's), `.authenticationFailed` (a sealed code that
    /// does not open), `.expired` once the lifetime passed; or the store's
    /// error if recording an outcome fails.
    public func receive(_ message: [UInt8], from slot: Int, now: Int64) throws {
        var next = machine
        do {
            let actions = try next.receive(message, from: slot, now: now)
            try store.perform(actions, now: now) { outbox.append($0) }
            machine = next
        } catch let error as ItsMeError where error.kind == .authenticationFailed || error.kind == .expired {
            // The participant's check is `refused`, or the roll call is over: kept.
            machine = next
            throw error
        }
    }

    /// The relay announced a new participant in slot `slot`: this device's
    /// HELLO goes out again (`takeOutgoing`), since the newcomer missed it.
    public func peerJoined(slot: Int) { outbox.append(machine.participants[0].hello.bytes) }

    /// The participant of relay slot `slot` left the room.
    public func peerLeft(slot: Int) { machine.peerLeft(slot: slot) }

    /// The owner confirmed that the contacts listed are on their call.
    /// `roster` is the `rosterHash` of the list shown: `.invalidState` if
    /// it changed since (show the new one), or if this round's roster is
    /// already confirmed. Draws this round's code.
    public func confirmRoster<R: RandomSource>(_ roster: [UInt8], now: Int64, random: inout R) throws {
        try machine.confirmRoster(roster, now: now, random: &random)
    }

    /// The owner read `myCode` aloud: the sealed codes go out (`takeOutgoing`).
    /// `.invalidState` before the roster is confirmed or after the code went out.
    public func confirmSaid<R: RandomSource>(now: Int64, random: inout R) throws {
        let actions = try machine.confirmSaid(now: now, random: &random)
        try store.perform(actions, now: now) { outbox.append($0) }
    }

    /// The owner typed `code` ("ECHO 042", any case), the code participant
    /// `index` read aloud. Checked at once if their sealed code is in, else
    /// when it arrives; returns the participant's state. Throws
    /// `.invalidArgument` (a code that is not a NATO word and three digits,
    /// no such participant), `.invalidState` (before the roster is
    /// confirmed; not a contact; already checked this round), `.locked`
    /// (three wrong codes this round), `.authenticationFailed` (their sealed
    /// code does not open), or the store's error.
    @discardableResult
    public func enterHeard(_ code: String, from index: Int, now: Int64) throws -> ParticipantState {
        guard let value = VoiceProtocol.parseCode(code) else {
            throw ItsMeError(.invalidArgument, "a code is a NATO word and three digits, as \"ECHO 042\"")
        }
        var next = machine
        do {
            let actions = try next.enterHeard(value, from: index, now: now)
            try store.perform(actions, now: now) { outbox.append($0) }
            machine = next
        } catch let error as ItsMeError where error.kind == .authenticationFailed || error.kind == .expired {
            machine = next
            throw error
        }
        return participants[index].state
    }
}
