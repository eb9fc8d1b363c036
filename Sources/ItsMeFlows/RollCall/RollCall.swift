import ItsMeRelayProtocol
import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// A roll call (docs/PROTOCOL.md section 20): everyone on a call checks, in
/// one round, which participants are contacts whose devices hold the seed
/// they exchanged, by codes read aloud and sealed per contact.
///
/// The driver of `RollCallMachine`: it reads the contacts' seeds and device
/// secrets from the store once, and records each check's outcome on its
/// contact, as Online Verify does. Every rule, what to send and when to
/// send it again included, is the machine's; the C layer and the Swift API
/// both go through this type.
///
/// The host joins the relay's group room `roomName` and reports its events:
/// `joined` (with this device's slot and the slots already there; again
/// after a reconnection), `peerJoined`, `peerLeft`. It feeds every message
/// of the room with the slot it came from (`receive`), calls `tick` about
/// once a second, and after each call sends what `takeOutgoing` gives. It
/// shows `participants` to its owner, who confirms that the contacts listed
/// are on the call (`confirmRoster`, with the `rosterHash` shown), reads
/// `myCode` aloud, says so (`confirmSaid`), and types the code each contact
/// read (`enterHeard`). A new roster starts a new round: the owner confirms
/// it and reads a new code; checks already made stay.
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
        /// The code heard is not the one their device sealed (this round).
        case wrong = 3
        /// The code matched, from a device other than the one known: their device changed.
        case deviceChanged = 4
        /// The code matched; no device secret of theirs is known here to check the device.
        case verifiedTagUnchecked = 5
        /// Their sealed code did not open, this round: their own device signed a code not sealed
        /// for this one (a message changed on the way is refused by its signature instead).
        case refused = 6
        /// A device that holds no seed with this one: not a contact.
        case unknown = 7
        /// One of the two devices binds the roll call to its call and the other does not.
        case bindingDiffers = 8
        /// Both bind the roll call to a call, and the calls differ: a device in another call.
        case otherCall = 9
    }

    /// One device of the roll call, as this device sees it.
    public struct Participant: Sendable, Equatable {
        /// 0 for this device; the others in the order they became present.
        public let index: Int
        /// The relay slot it speaks from (nil for this device).
        public let slot: Int?
        /// The contact it is (nil: unknown, another binding, or this device).
        public let contactID: Int64?
        /// What to show beside it: `.unknown` for this device and for one that is not a contact.
        public let state: ParticipantState
        /// It is not present now (its connection left); it may come back.
        public let left: Bool
        /// Its device holds the same roster as this one (always true for this device).
        public let agrees: Bool
    }

    /// A roll call lasts this long on a device, from its creation.
    public static let lifetime = RollCallProtocol.lifetime
    /// The most devices in one roll call, this one included.
    public static let maxParticipants = RollCallProtocol.maxParticipants
    /// The most contacts a device takes into a roll call.
    public static let maxContacts = RollCallProtocol.maxTags

    private let store: ContactStore
    private let driver: Driver<RollCallMachine>
    var machine: RollCallMachine { driver.machine }

    /// A roll call named by `meetingCode`, with every settled contact of
    /// `store`, bound to the host's call by `binding` (16 to 64 bytes that
    /// every participant of the call holds and the relay never sees,
    /// PROTOCOL.md 20.1) or not bound. The random source gives the roll-call
    /// key and the HELLO's padding. Nothing is sent before `joined`.
    /// Throws `.invalidArgument` for more than `maxContacts` contacts, a
    /// binding of another length or a time out of range, or the store's errors.
    public init<R: RandomSource>(
        store: ContactStore, meetingCode: RemoteCode, binding: [UInt8]? = nil, now: Int64, random: inout R
    ) throws {
        var members: [RollCallMachine.Member] = []
        for contact in try store.list() where contact.state != .awaitingPeer {
            members.append(
                RollCallMachine.Member(
                    contactID: contact.id, pid: contact.pid, seed: SecretBox(try store.seed(id: contact.id)),
                    tagSecrets: try store.tagSecrets(id: contact.id)))
        }
        self.store = store
        driver = try Driver(
            try RollCallMachine.start(
                meetingCode: meetingCode, binding: binding, members: members, myPID: store.ownerPublicKey, now: now, random: &random))
    }

    public var description: String { "RollCall(participants: \(machine.shown.count), phase: \(phase))" }

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
    public var rosterHash: [UInt8] { machine.round.roster }

    /// How many devices are present, this one included.
    public var headCount: Int { machine.round.names.count }

    /// The roster has not changed for 5 seconds and a present participant
    /// holds another: someone shows different participants to different
    /// devices (PROTOCOL.md 20.3).
    public var isSplit: Bool { machine.isSplit }

    /// This device's code for this round, to read aloud ("ECHO 042"), once
    /// the roster is confirmed.
    public var myCode: String? { machine.myCode.map(VoiceProtocol.codeText) }

    /// Every device ever present in the roll call, this one first.
    public var participants: [Participant] {
        machine.shown.enumerated().map { index, key in
            guard index > 0, let entry = machine.held[key] else {
                return Participant(index: 0, slot: nil, contactID: nil, state: .unknown, left: false, agrees: true)
            }
            let state: ParticipantState
            switch entry.binding {
            case .differs: state = .bindingDiffers
            case .otherCall: state = .otherCall
            case .same:
                if entry.member == nil {
                    state = .unknown
                } else {
                    switch machine.check(key) {
                    case .notYet: state = .notYet
                    case .verified: state = .verified
                    case .wrong: state = .wrong
                    case .deviceChanged: state = .deviceChanged
                    case .verifiedTagUnchecked: state = .verifiedTagUnchecked
                    case .refused: state = .refused
                    }
                }
            }
            return Participant(
                index: index, slot: entry.view?.slot, contactID: entry.member.map { machine.members[$0].contactID }, state: state,
                left: !machine.isPresent(key), agrees: machine.agrees(key))
        }
    }

    /// The next message to send to the group room, left in the queue; nil if none.
    /// The roll call keeps its queue in its machine (a VIEW is made when
    /// it is taken, PROTOCOL.md 20.6), not in the driver.
    public func peekOutgoing() throws -> [UInt8]? { try driver.withMachine { try $0.peekOutgoing() } }

    /// Removes the message `peekOutgoing` gave (it was handed to the relay).
    public func markSent() { driver.withMachine { $0.markSent() } }

    /// The next message to send, removed from the queue; nil if none.
    public func takeOutgoing() throws -> [UInt8]? {
        let next = try peekOutgoing()
        markSent()
        return next
    }

    /// The relay's `joined`: this device's slot and the slots present
    /// before it, at the first join and after every reconnection (the
    /// roll call goes on under the new slot). `.invalidArgument` for a slot
    /// out of 1...65535, `.expired`.
    public func joined(slot: Int, peers: [Int], now: Int64) throws {
        try driver.plainStep { try $0.joined(slot: slot, peers: peers, now: now) }
    }

    /// The relay announced a new participant in slot `slot`.
    public func peerJoined(slot: Int, now: Int64) throws { try driver.plainStep { try $0.peerJoined(slot: slot, now: now) } }

    /// The participant of relay slot `slot` left the room.
    public func peerLeft(slot: Int, now: Int64) throws { try driver.plainStep { try $0.peerLeft(slot: slot, now: now) } }

    /// About once a second: what is due or must go again is queued.
    public func tick(now: Int64) throws { try driver.plainStep { try $0.tick(now: now) } }

    /// Feeds one message of the group room, from relay slot `slot` (the
    /// relay's 2-byte prefix removed). A message that does not fit throws
    /// and changes nothing: `.malformedMessage`, `.authenticationFailed` (a
    /// signature, or a sealed code that does not open: its participant is
    /// refused for the round), `.invalidKey` (a reflection), `.invalidState`
    /// (a sender this device does not hold or see, a copy carried by another
    /// slot, another round's SAID), `.invalidArgument` (too many),
    /// `.expired` once the lifetime passed; or the store's error if
    /// recording an outcome fails.
    public func receive(_ message: [UInt8], from slot: Int, now: Int64) throws {
        try driver.step({ ((), try $0.receive(message, from: slot, now: now)) }, write: store.writer(now: now))
    }

    // MARK: The group room, as the relay speaks it

    /// The group room's path below the relay's base URL
    /// (`/v1/groups/{roomName}`, PROTOCOL.md 15.3).
    public var path: String { RelayPath.group(roomName).text }

    /// A text frame of the group room, as the relay sent it (an event,
    /// PROTOCOL.md 15.3): `joined`, `peer-joined` and `peer-left` go to
    /// `joined`, `peerJoined` and `peerLeft`, and throw what they throw;
    /// `refused` and an event this version does not know change nothing.
    /// `.invalidArgument` for a time out of range, `.malformedMessage` for
    /// a text that is not a group room's event (an event of a two-person
    /// room is not one): nothing changes.
    public func roomText(_ text: [UInt8], now: Int64) throws {
        try UnixTime.check(now)
        switch RoomEvent(json: text) {
        case .joined(let slot, let peers)?: try joined(slot: slot, peers: peers, now: now)
        case .peerJoined(let slot?)?: try peerJoined(slot: slot, now: now)
        case .peerLeft(let slot?)?: try peerLeft(slot: slot, now: now)
        case .refused?, .other?: break
        case .waiting?, .peerJoined(nil)?, .peerLeft(nil)?, nil:
            throw ItsMeError(.malformedMessage, "the relay sent a text frame that is not a group room's event")
        }
    }

    /// A binary frame of the group room, as the relay sent it: the sender's
    /// slot (2 bytes, big-endian), then its message, which goes to
    /// `receive` and throws what it throws. `.malformedMessage` for a frame
    /// shorter than a slot: nothing changes.
    public func roomBinary(_ frame: [UInt8], now: Int64) throws {
        guard let (slot, message) = RelayProtocol.groupMessage(frame) else {
            throw ItsMeError(.malformedMessage, "the relay forwarded a group room's message without its sender's slot")
        }
        try receive(message, from: slot, now: now)
    }

    /// The owner confirmed that the contacts listed are on their call.
    /// `roster` is the `rosterHash` of the list shown: `.invalidState` if
    /// it changed since (show the new one), or if this round's roster is
    /// already confirmed. Draws this round's code.
    public func confirmRoster<R: RandomSource>(_ roster: [UInt8], now: Int64, random: inout R) throws {
        try driver.plainStep { try $0.confirmRoster(roster, now: now, random: &random) }
    }

    /// The owner read `myCode` aloud: the sealed codes go out (`takeOutgoing`).
    /// `.invalidState` before the roster is confirmed or after the code went out.
    public func confirmSaid<R: RandomSource>(now: Int64, random: inout R) throws {
        try driver.plainStep { try $0.confirmSaid(now: now, random: &random) }
    }

    /// The owner typed `code` ("ECHO 042", any case), the code participant
    /// `index` read aloud. Checked at once if their sealed code is in, else
    /// when it arrives; returns the participant's state. Throws
    /// `.invalidArgument` (a code that is not a NATO word and three digits,
    /// no such participant), `.invalidState` (before the roster is
    /// confirmed; not a contact; not present; already checked), `.locked`
    /// (three wrong codes this round), `.authenticationFailed` (their sealed
    /// code does not open), or the store's error.
    @discardableResult
    public func enterHeard(_ code: String, from index: Int, now: Int64) throws -> ParticipantState {
        guard let value = VoiceProtocol.parseCode(code) else {
            throw ItsMeError(.invalidArgument, "a code is a NATO word and three digits, as \"ECHO 042\"")
        }
        try driver.step({ ((), try $0.enterHeard(value, from: index, now: now)) }, write: store.writer(now: now))
        return participants[index].state
    }
}
