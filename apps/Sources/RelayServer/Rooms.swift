import Foundation
import ItsMeRelayProtocol
import NIOCore
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
/// glibc's malloc_trim(3), which Swift's Glibc module does not export:
/// gives the heap's free pages back to the system.
@_silgen_name("malloc_trim")
private func mallocTrim(_ pad: Int) -> Int32
#endif

/// The two kinds of room, each a namespace of its own: the two-party room
/// of `/v1/rooms/{id}` (docs/PROTOCOL.md 15.3) and the group room of
/// `/v1/groups/{id}` (15.9).
enum RoomKind: Sendable {
    case pair
    case group
}

/// A peer in a room, with the slot it was given when it joined (a group
/// room's; in a two-party room, 1 and 2).
struct RoomMember {
    let slot: Int
    let connection: RoomConnection
}

/// A room: its peers in the order they joined, how many joins it has
/// taken, and when a binary message, a ping or a join last happened in it.
/// Touched only under the hub's lock.
final class ServerRoom {
    let id: String
    let kind: RoomKind
    var members: [RoomMember] = []
    /// Joins so far: the last slot given.
    var joins = 0
    /// Uptime nanoseconds of the last join, or of the last sweep that found
    /// activity.
    var lastActivity: UInt64

    init(id: String, kind: RoomKind, now: UInt64) {
        self.id = id
        self.kind = kind
        lastActivity = now
    }

    var connections: [RoomConnection] { members.map(\.connection) }
}

/// Every open room, two-party and group (docs/PROTOCOL.md 15.3, 15.9).
/// Joining and leaving take a lock; forwarding never does: the connections
/// of a room know each other and write to each other's channel directly
/// (RoomConnection).
final class RoomHub: @unchecked Sendable {
    enum Join {
        /// In the room with `slot`; `peers` were there before, in the order
        /// they joined (none: alone).
        case joined(slot: Int, peers: [RoomMember])
        case full
        case shuttingDown
    }

    let metrics: RelayMetrics
    /// Largest binary message, in bytes.
    let maxFrame: Int
    /// Peers in a group room at once, and joins over its life.
    let maxGroup: Int
    let maxGroupJoins: Int
    private let lock = NSLock()
    private var rooms: [String: ServerRoom] = [:]
    private var groups: [String: ServerRoom] = [:]
    private var shuttingDown = false
    /// Connections that left since memory was last handed back (`trimIfQuiet`).
    private var leftSinceTrim = 0
    /// `leftSinceTrim` at the previous sweep.
    private var leftAtLastSweep = 0

    /// Nanoseconds between two of the relay's pings to a connection.
    let pingInterval: UInt64
    /// The slices the relay's pings are spread over, one every 100 ms:
    /// each connection is in one (`RoomConnection.slice`), and one slice is
    /// pinged at a time.
    let pingSlices: Int
    private let sliceCount = Atomic<Int>(0)
    /// The connections in a room, by slice.
    private var bySlice: [[ObjectIdentifier: RoomConnection]]

    init(metrics: RelayMetrics, maxFrame: Int = 65_536, pingInterval: Double = 30, maxGroup: Int = 50, maxGroupJoins: Int = 200) {
        self.metrics = metrics
        self.maxFrame = maxFrame
        self.maxGroup = maxGroup
        self.maxGroupJoins = maxGroupJoins
        self.pingInterval = UInt64(pingInterval * 1e9)
        pingSlices = max(1, min(3000, Int(self.pingInterval / 100_000_000)))
        bySlice = Array(repeating: [:], count: pingSlices)
    }

    var isShuttingDown: Bool { lock.withLock { shuttingDown } }

    /// Puts `connection` in the room `id` of its kind, made if needed: a
    /// two-party room takes two peers, a group room `maxGroup` at once and
    /// `maxGroupJoins` over its life.
    func join(_ kind: RoomKind, _ id: String, _ connection: RoomConnection) -> (ServerRoom?, Join) {
        lock.withLock {
            if shuttingDown { return (nil, .shuttingDown) }
            let now = DispatchTime.now().uptimeNanoseconds
            let room: ServerRoom
            if let existing = table(kind)[id] {
                room = existing
            } else {
                room = ServerRoom(id: id, kind: kind, now: now)
                setRoom(room, kind, id)
            }
            let (most, joins) = kind == .pair ? (2, Int.max) : (maxGroup, maxGroupJoins)
            guard room.members.count < most, room.joins < joins else { return (nil, .full) }
            let peers = room.members
            room.joins += 1
            room.members.append(RoomMember(slot: room.joins, connection: connection))
            if !peers.isEmpty { room.lastActivity = now }
            bySlice[connection.slice][ObjectIdentifier(connection)] = connection
            updateGauges()
            return (room, .joined(slot: room.joins, peers: peers))
        }
    }

    /// `connection` is leaving `room`. A two-party room ends with it; a
    /// group room when its last peer leaves. Returns the peers to tell
    /// (`peer-left`; in a two-party room, then a 1000 close), none if the
    /// connection had already left or the room had ended.
    func leave(_ room: ServerRoom, _ connection: RoomConnection) -> [RoomConnection] {
        lock.withLock {
            guard table(room.kind)[room.id] === room, room.members.contains(where: { $0.connection === connection }) else {
                return []
            }
            let others = room.members.filter { $0.connection !== connection }.map(\.connection)
            switch room.kind {
            case .pair:
                room.members = []
                leftSinceTrim += 1 + others.count
            case .group:
                room.members.removeAll { $0.connection === connection }
                leftSinceTrim += 1
            }
            if room.members.isEmpty { setRoom(nil, room.kind, room.id) }
            updateGauges()
            return others
        }
    }

    /// Closes rooms of either kind without a binary message or a ping for
    /// `seconds` (code 4000). Called about once a second; each connection
    /// marks its activity with one relaxed atomic store per read burst,
    /// which this sweep collects.
    func closeIdle(olderThan seconds: Double) async {
        let now = DispatchTime.now().uptimeNanoseconds
        let span = UInt64(seconds * 1e9)
        let idle: [RoomConnection] = lock.withLock {
            var idle: [RoomConnection] = []
            for kind in [RoomKind.pair, .group] {
                var ended: [String] = []
                for (id, room) in table(kind) {
                    // Every member's mark is taken, active or not.
                    var active = false
                    for member in room.members where member.connection.takeActivity() { active = true }
                    if active {
                        room.lastActivity = now
                    } else if now > span, room.lastActivity < now - span {
                        ended.append(id)
                        idle += room.connections
                        room.members = []
                    }
                }
                for id in ended {
                    setRoom(nil, kind, id)
                    metrics.reject(.idle)
                }
            }
            leftSinceTrim += idle.count
            updateGauges()
            return idle
        }
        for connection in idle { connection.close(.idle) }
        trimIfQuiet()
    }

    /// Shutdown: every connection of either kind closed with 1001, no room
    /// opened again.
    func closeAll() async {
        let all: [RoomConnection] = lock.withLock {
            shuttingDown = true
            let all = (rooms.values.flatMap(\.connections)) + groups.values.flatMap(\.connections)
            for room in rooms.values { room.members = [] }
            for room in groups.values { room.members = [] }
            rooms.removeAll()
            groups.removeAll()
            updateGauges()
            return all
        }
        for connection in all { connection.close(.goingAway) }
    }

    /// The open rooms of `kind`. Under the lock.
    private func table(_ kind: RoomKind) -> [String: ServerRoom] {
        kind == .pair ? rooms : groups
    }

    /// Opens (`room`) or ends (nil) the room `id` of `kind`. Under the lock.
    private func setRoom(_ room: ServerRoom?, _ kind: RoomKind, _ id: String) {
        switch kind {
        case .pair: rooms[id] = room
        case .group: groups[id] = room
        }
    }

    /// Under the lock.
    private func updateGauges() {
        metrics.roomsOpen.set(to: Double(rooms.count))
        metrics.groupRoomsOpen.set(to: Double(groups.count))
    }

    /// The slice of the next connection: round robin, so that slices stay
    /// even.
    func nextSlice() -> Int {
        sliceCount.wrappingAdd(1, ordering: .relaxed).oldValue % pingSlices
    }

    /// `connection` has ended: no more pings.
    func forget(_ connection: RoomConnection) {
        _ = lock.withLock { bySlice[connection.slice].removeValue(forKey: ObjectIdentifier(connection)) }
    }

    /// The relay's own ping to every connection of slice `slice` that has
    /// been open for an interval (docs/PROTOCOL.md 15.3, Keep-alive): a
    /// connection that has not answered the previous one is closed with
    /// 1001. Pinging every connection at once stalls forwarding on a busy
    /// relay (10,000 writes and as many pongs: tens of milliseconds), so a
    /// slice at a time, each connection still once per interval.
    func ping(slice: Int) {
        let now = NIODeadline.now().uptimeNanoseconds
        let due: [RoomConnection] = lock.withLock {
            bySlice[slice].values.filter { now &- $0.opened >= pingInterval }
        }
        for connection in due { connection.keepAlive() }
    }

    /// Hands freed memory back to the system once many connections have
    /// left and none left since the previous sweep (a second ago): glibc
    /// keeps the heap of a closed room's buffers otherwise, and the relay's
    /// resident size would stay at its peak. Trimming while connections are
    /// still going would leave most of what they free to the next trim,
    /// which may not come.
    private func trimIfQuiet() {
        let due: Bool = lock.withLock {
            defer { leftAtLastSweep = leftSinceTrim }
            guard leftSinceTrim >= 1000, leftSinceTrim == leftAtLastSweep else { return false }
            leftSinceTrim = 0
            return true
        }
        #if canImport(Glibc)
        if due { _ = mallocTrim(0) }
        #endif
    }
}

/// The relay's ping to every room connection, two-party or group, once per `--ping-interval`
/// (30 seconds), a slice of the connections at a time.
struct RoomKeepAlive: Service {
    let hub: RoomHub

    func run() async throws {
        let hub = hub, slices = hub.pingSlices
        let step = Duration.nanoseconds(Int64(hub.pingInterval) / Int64(slices))
        try? await cancelWhenGracefulShutdown {
            var slice = 0
            while true {
                try await Task.sleep(for: step)
                hub.ping(slice: slice)
                slice = (slice + 1) % slices
            }
        }
    }
}
