import Foundation
import ItsMeKit
import NIOCore
import NIOPosix
import ItsMeRelayProtocol

/// What arrives in a group room: the relay's events (text frames of JSON,
/// docs/PROTOCOL.md 15.9) and the other peers' messages (binary frames,
/// each behind its sender's slot). The end of the connection is not an
/// event: `GroupRoom.nextEvent` throws it as a `RelayError` (`"room-full"`,
/// `"closed"`, `"connection"`).
public enum GroupEvent: Sendable, Equatable {
    /// This side is in the room with `slot`; `peers` were there before it,
    /// ascending.
    case joined(slot: Int, peers: [Int])
    /// A peer joined with `slot`.
    case peerJoined(slot: Int)
    /// The peer of `slot` left; the room goes on with the others.
    case peerLeft(slot: Int)
    /// The relay did not forward a message (`"no-peer"`: this side was alone).
    case refused(reason: String)
    /// An event of a type this client does not know.
    case other(type: String)
    /// A binary message from the peer of slot `from`.
    case message(from: Int, [UInt8])
}

/// A frame of a group room, as the relay sent it: for a host that hands the
/// room's frames to the core as they came (`RollCall.roomText`,
/// `roomBinary`) and parses nothing.
public enum GroupInput: Sendable, Equatable {
    /// A text frame: one of the relay's events.
    case text([UInt8])
    /// A binary frame: a peer's message behind its sender's slot.
    case binary([UInt8])
}

/// A connection to a relay group room (docs/PROTOCOL.md 15.9), a WebSocket
/// (`wss://` for an https:// relay): up to `--max-group` peers, each given
/// a slot as it joins; every binary message goes to all the others, never
/// stored. The same connection as a two-party room's (RoomLink, RoomSocket),
/// on another path.
///
/// Pull-style: `nextEvent` returns what arrived, in order: first `joined`,
/// then the others' joins, leaves and messages, in the relay's order.
/// `slot` and `peers` follow the events read so far. Failures throw
/// `RelayError` (kind `"room-full"`, `"closed"`, `"timeout"`,
/// `"connection"` or `"bad-response"`). Call `leave` when done: the others
/// get `peer-left` and the connection ends.
///
/// Not for use by two tasks at once.
public final class GroupRoom: @unchecked Sendable {
    /// The group room's ID (32 lowercase hex digits).
    public let groupID: String
    /// This side's slot, once `joined` has been read.
    public var slot: Int? { lock.withLock { ownSlot } }
    /// The slots of the other peers present, ascending, as far as the
    /// events read said.
    public var peers: [Int] { lock.withLock { present.sorted() } }

    private let link: RoomLink
    private let lock = NSLock()
    private var ownSlot: Int?
    private var present: Set<Int> = []

    /// The largest message a group room forwards (`--max-frame`); it arrives
    /// 2 bytes longer, behind its sender's slot.
    public static let maxFrame = 65_536
    /// The most items kept unread: a room of many peers says more than a
    /// two-party room, so a reader may fall further behind before it is cut
    /// off.
    static let maxQueued = 4096

    private init(groupID: String, link: RoomLink) {
        self.groupID = groupID
        self.link = link
    }

    /// Joins group room `groupID` (32 lowercase hex digits) at `url`,
    /// waiting at most `timeout` seconds for the WebSocket to open. The
    /// first event is then `joined` (or, for a room that is full or has
    /// given all its slots, a `"room-full"` error). A relay that refuses the
    /// upgrade gives `"connection"` (or `"busy"`, `"rate-limited"`) with its
    /// HTTP status.
    public static func join(
        _ url: RelayURL, groupID: String, timeout: Double,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> GroupRoom {
        try Checks.id(groupID, "group room ID")
        let link = try await RoomLink.open(
            url, path: RelayPath.group(groupID).text, what: "the group room", maxMessage: maxFrame + 2, maxQueued: maxQueued,
            timeout: timeout, eventLoopGroup: eventLoopGroup)
        return GroupRoom(groupID: groupID, link: link)
    }

    /// The next frame that arrives, as the relay sent it. Throws
    /// `RelayError`: `"timeout"` when nothing arrived within `timeout`
    /// seconds; `"room-full"`, `"closed"` or `"connection"` once the
    /// connection has ended.
    public func nextInput(timeout: Double) async throws -> GroupInput {
        let seconds = try Checks.seconds(timeout, "timeout")
        while true {
            switch try await link.inbox.next(timeout: seconds) {
            case .timedOut:
                throw RelayError.timeout("nothing arrived from the group room in time")
            case .ended(let end):
                throw Self.closedError(end)
            case .opened:
                continue
            case .binary(let bytes):
                return .binary(bytes)
            case .text(let text):
                return .text(Array(text.utf8))
            }
        }
    }

    /// The next thing that arrives (an event or a peer's message), read
    /// through `nextInput`. Throws what it throws, and `"bad-response"` for
    /// a text frame that is not an event or a binary one without a slot.
    public func nextEvent(timeout: Double) async throws -> GroupEvent {
        switch try await nextInput(timeout: timeout) {
        case .binary(let bytes):
            guard let (slot, message) = RelayProtocol.groupMessage(bytes) else {
                throw RelayError.badResponse("the relay forwarded a message without a slot")
            }
            return .message(from: slot, message)
        case .text(let text):
            let event = try Self.parseEvent(text)
            lock.withLock {
                switch event {
                case .joined(let slot, let peers):
                    ownSlot = slot
                    present = Set(peers)
                case .peerJoined(let slot): present.insert(slot)
                case .peerLeft(let slot): present.remove(slot)
                case .refused, .other, .message: break
                }
            }
            return event
        }
    }

    static func parseEvent(_ text: [UInt8]) throws -> GroupEvent {
        switch ItsMeRelayProtocol.RoomEvent(json: text) {
        case .joined(let slot, let peers)?: return .joined(slot: slot, peers: peers)
        case .peerJoined(let slot?)?: return .peerJoined(slot: slot)
        case .peerLeft(let slot?)?: return .peerLeft(slot: slot)
        case .refused(let reason)?: return .refused(reason: reason)
        case .other(let type)?: return .other(type: type)
        case .waiting?, .peerJoined(nil)?, .peerLeft(nil)?, nil:
            throw RelayError.badResponse("the relay sent a text frame that is not a group room's event")
        }
    }

    /// The error for a connection that ended.
    static func closedError(_ end: RoomInbox.End) -> RelayError {
        RelayRoom.closedError(end, full: "the group room is full, or has given all the slots it gives")
    }

    /// Sends `bytes` (1 to 65,536) to every other peer as one binary
    /// message; they get it behind this side's slot.
    public func send(_ bytes: [UInt8]) async throws {
        guard (1...Self.maxFrame).contains(bytes.count) else {
            throw ItsMeError(.invalidArgument, "a group room message is 1 to \(Self.maxFrame) bytes")
        }
        try await link.send(RoomSocket.frame(opcode: 0x2, payload: bytes)) { Self.closedError($0) }
    }

    /// Sends a WebSocket ping: it keeps the room from closing as idle
    /// (docs/PROTOCOL.md 15.9) and is not forwarded.
    public func ping() async throws {
        try await link.send(RoomSocket.frame(opcode: 0x9, payload: [])) { Self.closedError($0) }
    }

    /// Leaves the room (the others get `peer-left`) and waits, briefly, for
    /// the relay to end the connection; idempotent.
    public func leave() async {
        await link.leave()
    }
}

extension GroupRoom: CustomStringConvertible {
    /// The start of the group room's ID, this side's slot and the others'.
    public var description: String {
        "GroupRoom(\(groupID.prefix(8))..., slot: \(slot.map(String.init) ?? "none"), peers: \(peers))"
    }
}
