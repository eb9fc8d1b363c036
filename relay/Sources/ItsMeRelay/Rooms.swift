import Foundation
import HummingbirdWebSocket
import NIOWebSocket
import Logging
import NIOCore

/// One peer's connection in a room.
final class RoomPeer: Sendable {
    let outbound: WebSocketOutboundWriter
    let number: UInt64

    init(outbound: WebSocketOutboundWriter, number: UInt64) {
        self.outbound = outbound
        self.number = number
    }

    func send(event: String) async {
        try? await outbound.write(.text(#"{"type":"\#(event)"}"#))
    }

    func close(_ code: WebSocketErrorCode, _ reason: String) async {
        try? await outbound.close(code, reason: reason)
    }
}

/// A room: at most two peers, and when a binary frame or a ping last passed.
final class Room: @unchecked Sendable {
    let id: String
    private let lock = NSLock()
    private var peers: [RoomPeer] = []
    private var lastActivity: UInt64
    private var ended = false

    init(id: String) {
        self.id = id
        lastActivity = DispatchTime.now().uptimeNanoseconds
    }

    enum Join { case alone, paired(with: RoomPeer), full }

    fileprivate func join(_ peer: RoomPeer) -> Join {
        lock.withLock {
            if ended || peers.count >= 2 { return .full }
            peers.append(peer)
            lastActivity = DispatchTime.now().uptimeNanoseconds
            return peers.count == 1 ? .alone : .paired(with: peers[0])
        }
    }

    /// The other peer, for forwarding a frame (which counts as activity).
    func other(than peer: RoomPeer) -> RoomPeer? {
        lock.withLock {
            guard !ended, peers.count == 2 else { return nil }
            lastActivity = DispatchTime.now().uptimeNanoseconds
            return peers[0] === peer ? peers[1] : peers[0]
        }
    }

    /// A ping from a peer: activity, like a forwarded frame (15.3).
    func touch() {
        lock.withLock {
            if !ended { lastActivity = DispatchTime.now().uptimeNanoseconds }
        }
    }

    /// Removes `peer`; returns the peer left behind (the room then ends), and
    /// whether `peer` was still in the room.
    fileprivate func leave(_ peer: RoomPeer) -> (wasHere: Bool, remaining: RoomPeer?) {
        lock.withLock {
            guard let index = peers.firstIndex(where: { $0 === peer }) else { return (false, nil) }
            peers.remove(at: index)
            ended = true
            let remaining = peers.first
            peers.removeAll()
            return (true, remaining)
        }
    }

    /// Ends the room if idle since `deadline`; returns its peers to close.
    fileprivate func endIfIdle(since deadline: UInt64) -> [RoomPeer] {
        lock.withLock {
            guard !ended, lastActivity < deadline else { return [] }
            ended = true
            let all = peers
            peers.removeAll()
            return all
        }
    }

    fileprivate func endNow() -> [RoomPeer] {
        lock.withLock {
            ended = true
            let all = peers
            peers.removeAll()
            return all
        }
    }

    fileprivate var isEnded: Bool { lock.withLock { ended } }
}

/// Sees a peer's WebSocket frames as they are decoded, ahead of the WebSocket
/// layer, which answers a ping with a pong itself and hands the room only data
/// messages: a ping counts as activity in the room (docs/PROTOCOL.md 15.3).
/// Every frame goes on unchanged; a pong does not count.
final class PingObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    private let room: Room

    init(room: Room) { self.room = room }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if frame.opcode == .ping, frame.fin { room.touch() }
        context.fireChannelRead(data)
    }

    /// Puts an observer for `room` right after the connection's frame guard,
    /// so that only a ping that keeps the rules counts.
    static func install(on channel: any Channel, room: Room) async throws {
        try await channel.eventLoop.submit {
            let pipeline = channel.pipeline.syncOperations
            let frameGuard = try pipeline.handler(type: FrameGuard.self)
            try pipeline.addHandler(PingObserver(room: room), position: .after(frameGuard))
        }.get()
    }
}

/// Every open room (docs/PROTOCOL.md 15.3).
final class RoomHub: @unchecked Sendable {
    private let lock = NSLock()
    private var rooms: [String: Room] = [:]
    private var nextPeer: UInt64 = 0
    private var shuttingDown = false
    let metrics: RelayMetrics

    init(metrics: RelayMetrics) { self.metrics = metrics }

    var isShuttingDown: Bool { lock.withLock { shuttingDown } }

    func makePeer(_ outbound: WebSocketOutboundWriter) -> RoomPeer {
        let number = lock.withLock {
            nextPeer &+= 1
            return nextPeer
        }
        return RoomPeer(outbound: outbound, number: number)
    }

    /// Puts `peer` in room `id` (made if needed, or made anew if the old one
    /// has ended but not yet been removed).
    func join(_ id: String, _ peer: RoomPeer) -> (Room, Room.Join) {
        lock.withLock {
            if shuttingDown { return (Room(id: id), .full) }
            let room: Room
            if let existing = rooms[id], !existing.isEnded {
                room = existing
            } else {
                room = Room(id: id)
                rooms[id] = room
            }
            let result = room.join(peer)
            metrics.roomsOpen.set(to: Double(rooms.count))
            return (room, result)
        }
    }

    /// `peer` left (its connection ended): the other, if any, is told and
    /// closed with 1000; the room ends.
    func leave(_ room: Room, _ peer: RoomPeer) async {
        let (wasHere, remaining) = room.leave(peer)
        forget(room)
        guard wasHere, let remaining else { return }
        await remaining.send(event: "peer-left")
        await remaining.close(.normalClosure, "peer left")
    }

    private func forget(_ room: Room) {
        lock.withLock {
            if rooms[room.id] === room, room.isEnded { rooms.removeValue(forKey: room.id) }
            metrics.roomsOpen.set(to: Double(rooms.count))
        }
    }

    /// Closes rooms without a binary frame or a ping for `seconds` (code 4000).
    func closeIdle(olderThan seconds: Double) async {
        let now = DispatchTime.now().uptimeNanoseconds
        let span = UInt64(seconds * 1e9)
        guard now > span else { return }
        let deadline = now - span
        let all = lock.withLock { Array(rooms.values) }
        for room in all {
            let peers = room.endIfIdle(since: deadline)
            if peers.isEmpty { continue }
            forget(room)
            metrics.reject("idle")
            for peer in peers { await peer.close(.unknown(4000), "idle") }
        }
    }

    /// Shutdown: every connection closed with 1001, no room opened again.
    func closeAll() async {
        let all = lock.withLock {
            shuttingDown = true
            let all = Array(rooms.values)
            rooms.removeAll()
            metrics.roomsOpen.set(to: 0.0)
            return all
        }
        await withTaskGroup(of: Void.self) { group in
            for room in all {
                for peer in room.endNow() {
                    group.addTask { await peer.close(.goingAway, "relay shutting down") }
                }
            }
        }
    }
}
