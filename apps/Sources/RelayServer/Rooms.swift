import Foundation
import NIOCore
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
/// glibc's malloc_trim(3), which Swift's Glibc module does not export:
/// gives the heap's free pages back to the system.
@_silgen_name("malloc_trim")
private func mallocTrim(_ pad: Int) -> Int32
#endif

/// A room: at most two peers, and when a binary message or a ping last
/// passed in it. Touched only under the hub's lock.
final class ServerRoom {
    let id: String
    var first: RoomConnection?
    var second: RoomConnection?
    /// Uptime nanoseconds of the last sweep that found activity.
    var lastActivity: UInt64

    init(id: String, now: UInt64) {
        self.id = id
        lastActivity = now
    }

    var members: [RoomConnection] { [first, second].compactMap { $0 } }
}

/// Every open room (docs/PROTOCOL.md 15.3). Joining and leaving take a lock;
/// forwarding never does: the two connections of a room know each other
/// and write to each other's channel directly (RoomConnection).
final class RoomHub: @unchecked Sendable {
    enum Join {
        case alone
        case paired(with: RoomConnection)
        case full
        case shuttingDown
    }

    let metrics: RelayMetrics
    /// Largest binary message, in bytes.
    let maxFrame: Int
    private let lock = NSLock()
    private var rooms: [String: ServerRoom] = [:]
    private var shuttingDown = false
    /// Connections that left since memory was last handed back (`trimIfQuiet`).
    private var leftSinceTrim = 0
    /// `leftSinceTrim` at the previous sweep.
    private var leftAtLastSweep = 0

    /// Nanoseconds between two of the relay's pings to a connection.
    let pingInterval: UInt64
    /// The slices the relay's pings are spread over, one every 100 ms:
    /// each connection is in one (`RoomConnection.slot`), and one slice is
    /// pinged at a time.
    let pingSlices: Int
    private let slots = Atomic<Int>(0)
    /// The connections in a room, by slice.
    private var bySlot: [[ObjectIdentifier: RoomConnection]]

    init(metrics: RelayMetrics, maxFrame: Int = 65_536, pingInterval: Double = 30) {
        self.metrics = metrics
        self.maxFrame = maxFrame
        self.pingInterval = UInt64(pingInterval * 1e9)
        pingSlices = max(1, min(3000, Int(self.pingInterval / 100_000_000)))
        bySlot = Array(repeating: [:], count: pingSlices)
    }

    var isShuttingDown: Bool { lock.withLock { shuttingDown } }

    /// Puts `connection` in room `id`, made if needed.
    func join(_ id: String, _ connection: RoomConnection) -> (ServerRoom?, Join) {
        lock.withLock {
            if shuttingDown { return (nil, .shuttingDown) }
            let room: ServerRoom
            if let existing = rooms[id] {
                room = existing
            } else {
                room = ServerRoom(id: id, now: DispatchTime.now().uptimeNanoseconds)
                rooms[id] = room
            }
            let result: Join
            if room.first == nil {
                room.first = connection
                result = .alone
            } else if room.second == nil, let first = room.first {
                room.second = connection
                room.lastActivity = DispatchTime.now().uptimeNanoseconds
                result = .paired(with: first)
            } else {
                return (nil, .full)
            }
            bySlot[connection.slot][ObjectIdentifier(connection)] = connection
            metrics.roomsOpen.set(to: Double(rooms.count))
            return (room, result)
        }
    }

    /// `connection` is leaving `room`: the room ends. Returns the peer left
    /// behind, which the caller tells (`peer-left`, then a 1000 close), or
    /// nil if there is none or the room had already ended.
    func leave(_ room: ServerRoom, _ connection: RoomConnection) -> RoomConnection? {
        lock.withLock {
            guard rooms[room.id] === room, room.first === connection || room.second === connection else { return nil }
            let other = room.first === connection ? room.second : room.first
            room.first = nil
            room.second = nil
            rooms.removeValue(forKey: room.id)
            leftSinceTrim += other == nil ? 1 : 2
            metrics.roomsOpen.set(to: Double(rooms.count))
            return other
        }
    }

    /// Closes rooms without a binary message or a ping for `seconds` (code
    /// 4000). Called about once a second; each connection marks its
    /// activity with one relaxed atomic store per read burst, which this
    /// sweep collects.
    func closeIdle(olderThan seconds: Double) async {
        let now = DispatchTime.now().uptimeNanoseconds
        let span = UInt64(seconds * 1e9)
        let idle: [RoomConnection] = lock.withLock {
            var idle: [RoomConnection] = []
            var ended: [String] = []
            for (id, room) in rooms {
                let a = room.first?.takeActivity() ?? false
                let b = room.second?.takeActivity() ?? false
                if a || b {
                    room.lastActivity = now
                } else if now > span, room.lastActivity < now - span {
                    ended.append(id)
                    idle += room.members
                    room.first = nil
                    room.second = nil
                }
            }
            for id in ended {
                rooms.removeValue(forKey: id)
                metrics.reject("idle")
            }
            leftSinceTrim += idle.count
            metrics.roomsOpen.set(to: Double(rooms.count))
            return idle
        }
        for connection in idle { connection.close(.idle) }
        trimIfQuiet()
    }

    /// Shutdown: every connection closed with 1001, no room opened again.
    func closeAll() async {
        let all: [RoomConnection] = lock.withLock {
            shuttingDown = true
            let all = rooms.values.flatMap(\.members)
            for room in rooms.values {
                room.first = nil
                room.second = nil
            }
            rooms.removeAll()
            metrics.roomsOpen.set(to: 0)
            return all
        }
        for connection in all { connection.close(.goingAway) }
    }

    /// The slice of the next connection: round robin, so that slices stay
    /// even.
    func nextSlot() -> Int {
        slots.wrappingAdd(1, ordering: .relaxed).oldValue % pingSlices
    }

    /// `connection` has ended: no more pings.
    func forget(_ connection: RoomConnection) {
        _ = lock.withLock { bySlot[connection.slot].removeValue(forKey: ObjectIdentifier(connection)) }
    }

    /// The relay's own ping to every connection of slice `slot` that has
    /// been open for an interval (docs/PROTOCOL.md 15.3, Keep-alive): a
    /// connection that has not answered the previous one is closed with
    /// 1001. Pinging every connection at once stalls forwarding on a busy
    /// relay (10,000 writes and as many pongs: tens of milliseconds), so a
    /// slice at a time, each connection still once per interval.
    func ping(slot: Int) {
        let now = NIODeadline.now().uptimeNanoseconds
        let due: [RoomConnection] = lock.withLock {
            bySlot[slot].values.filter { now &- $0.opened >= pingInterval }
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

/// The relay's ping to every room connection once per `--ping-interval`
/// (30 seconds), a slice of the connections at a time.
struct RoomKeepAlive: Service {
    let hub: RoomHub

    func run() async throws {
        let hub = hub, slices = hub.pingSlices
        let step = Duration.nanoseconds(Int64(hub.pingInterval) / Int64(slices))
        try? await cancelWhenGracefulShutdown {
            var slot = 0
            while true {
                try await Task.sleep(for: step)
                hub.ping(slot: slot)
                slot = (slot + 1) % slices
            }
        }
    }
}
