import Foundation
import ItsMeKit
import NIOCore
import NIOPosix
import NIOSSL
import ItsMeRelayProtocol

/// What arrives in a room: the relay's events (text frames of JSON,
/// docs/PROTOCOL.md 15.3) and the peer's messages (binary frames). The end
/// of the connection is not an event: `RelayRoom.nextEvent` throws it as a
/// `RelayError` (`"room-full"`, `"closed"`, `"connection"`).
public enum RoomEvent: Sendable, Equatable {
    /// This side joined an empty room and waits for the other.
    case waiting
    /// The other peer is in the room (sent to both when the second arrives).
    case peerJoined
    /// The other peer left; the relay then closes this connection.
    case peerLeft
    /// The relay did not forward a frame (`"no-peer"`: this side was alone).
    case refused(reason: String)
    /// An event of a type this client does not know (the drivers ignore it).
    case other(type: String)
    /// A binary frame from the peer.
    case message([UInt8])
}

/// What a room sends, as it came (`RelayRoom.nextInput`).
enum RoomInput {
    case text([UInt8])
    case binary([UInt8])
    case ended(code: Int?, error: RelayError)
}

/// A connection to a relay room (docs/PROTOCOL.md 15.3), a WebSocket
/// (`wss://` for an https:// relay): at most two peers, whose binary frames
/// the relay forwards unchanged and never stores.
///
/// Pull-style: `nextEvent` returns what arrived, in order; `receive` the
/// peer's next message; `waitForPeer` returns once the other peer is in.
/// Failures throw `RelayError` (kind `"peer-left"`, `"refused"`,
/// `"room-full"`, `"closed"`, `"timeout"`, `"connection"` or
/// `"bad-response"`). Call `close` when done: it leaves the room (the peer
/// gets `peer-left`) and ends the connection.
///
/// Not for use by two tasks at once.
public final class RelayRoom: @unchecked Sendable {
    /// The room's ID (32 lowercase hex digits).
    public let roomID: String
    /// Whether the other peer is in the room, as far as the events said.
    public var peerPresent: Bool { lock.withLock { present } }

    private let link: RoomLink
    private let lock = NSLock()
    private var present = false

    /// The largest frame a room forwards (`--max-frame`).
    public static let maxFrame = 65_536

    private init(roomID: String, link: RoomLink) {
        self.roomID = roomID
        self.link = link
    }

    /// Joins room `roomID` (32 lowercase hex digits) at `url`, waiting at
    /// most `timeout` seconds for the WebSocket to open. The first event is
    /// then `waiting` or `peerJoined` (or, for a full room, a `"room-full"`
    /// error). A relay that refuses the upgrade gives `"connection"` (or
    /// `"busy"`, `"rate-limited"`) with its HTTP status.
    public static func join(
        _ url: RelayURL, roomID: String, timeout: Double,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> RelayRoom {
        try Checks.id(roomID, "room ID")
        let link = try await RoomLink.open(
            url, path: RelayPath.room(roomID).text, what: "the room", maxMessage: maxFrame, maxQueued: RoomInbox.maxQueued,
            timeout: timeout, eventLoopGroup: eventLoopGroup)
        return RelayRoom(roomID: roomID, link: link)
    }

    /// The next thing that arrives (an event or the peer's frame). Throws
    /// `RelayError`: `"timeout"` when nothing arrived within `timeout`
    /// seconds; `"room-full"`, `"closed"` or `"connection"` once the
    /// connection has ended; `"bad-response"` for a text frame that is not
    /// an event.
    public func nextEvent(timeout: Double) async throws -> RoomEvent {
        switch try await nextInput(timeout: timeout) {
        case nil:
            throw RelayError.timeout("nothing arrived from the room in time")
        case .ended(_, let error)?:
            throw error
        case .binary(let bytes)?:
            return .message(bytes)
        case .text(let text)?:
            let event = try Self.parseEvent(String(decoding: text, as: UTF8.self))
            lock.withLock {
                if event == .peerJoined { present = true }
                if event == .peerLeft { present = false }
            }
            return event
        }
    }

    static func parseEvent(_ text: String) throws -> RoomEvent {
        switch ItsMeRelayProtocol.RoomEvent(json: Array(text.utf8)) {
        case .waiting?: return .waiting
        case .peerJoined(nil)?: return .peerJoined
        case .peerLeft(nil)?: return .peerLeft
        case .refused(let reason)?: return .refused(reason: reason)
        case .other(let type)?: return .other(type: type)
        case .joined?, .peerJoined?, .peerLeft?, nil:
            throw RelayError.badResponse("the relay sent a text frame that is not a room's event")
        }
    }

    /// The error for a connection that ended; `full` says what 4009 means.
    static func closedError(_ end: RoomInbox.End, full: String = "the room already holds two people") -> RelayError {
        switch end {
        case .closed(let code):
            switch code {
            case RoomCloseCode.roomFull: return RelayError(full, kind: RelayError.roomFull)
            case RoomCloseCode.idle: return RelayError("the room was idle for too long and the relay closed it", kind: "closed")
            case RoomCloseCode.goingAway: return RelayError("the relay is shutting down", kind: "closed")
            case RoomCloseCode.tooLarge: return RelayError("a frame was too large for the relay", kind: "closed")
            case let code?: return RelayError("the relay closed the room connection (code \(code))", kind: "closed")
            case nil: return RelayError("the room connection closed", kind: "closed")
            }
        case .failed(let error):
            if let e = error as? RelayError { return e }
            return .connection("the room connection failed (\(HTTPRequester.describe(error)))")
        }
    }

    /// What the room sends next, as it came, for a driver that reads the
    /// relay's events itself (the core's `RoomSession`): a text frame, a
    /// binary frame, or the end of the connection (the relay's close code,
    /// nil when none came, and the error that says so); nil when nothing
    /// arrived within `timeout` seconds.
    func nextInput(timeout: Double) async throws -> RoomInput? {
        let seconds = try Checks.seconds(timeout, "timeout")
        while true {
            switch try await link.inbox.next(timeout: seconds) {
            case .timedOut: return nil
            case .opened: continue
            case .binary(let bytes): return .binary(bytes)
            case .text(let text): return .text(Array(text.utf8))
            case .ended(let end):
                guard case .closed(let code) = end else { return .ended(code: nil, error: Self.closedError(end)) }
                return .ended(code: code, error: Self.closedError(end))
            }
        }
    }

    /// Returns once the other peer is in the room (`peerJoined`; at once
    /// if it is already). A frame before that is `"bad-response"`.
    public func waitForPeer(timeout: Double) async throws {
        let deadline = Deadline(seconds: try Checks.seconds(timeout, "timeout"))
        while !peerPresent {
            if case .message = try await nextEvent(timeout: deadline.remaining) {
                throw RelayError.badResponse("a frame arrived before the peer joined")
            }
        }
    }

    /// Sends `bytes` (1 to 65,536) to the peer as one binary frame.
    public func send(_ bytes: [UInt8]) async throws {
        guard (1...Self.maxFrame).contains(bytes.count) else {
            throw ItsMeError(.invalidArgument, "a room frame is 1 to \(Self.maxFrame) bytes")
        }
        try await link.send(RoomSocket.frame(opcode: 0x2, payload: bytes)) { Self.closedError($0) }
    }

    /// Sends a WebSocket ping: it keeps the room from closing as idle while
    /// a person decides (docs/PROTOCOL.md 15.3) and is not forwarded.
    public func ping() async throws {
        try await link.send(RoomSocket.frame(opcode: 0x9, payload: [])) { Self.closedError($0) }
    }

    /// The peer's next binary frame, within `timeout` seconds. `peer-left`
    /// and `refused` throw `RelayError` of that kind; other events are
    /// skipped.
    public func receive(timeout: Double) async throws -> [UInt8] {
        let deadline = Deadline(seconds: try Checks.seconds(timeout, "timeout"))
        while true {
            switch try await nextEvent(timeout: deadline.remaining) {
            case .message(let bytes):
                return bytes
            case .peerLeft:
                throw RelayError("the other person left the room", kind: RelayError.peerLeft)
            case .refused(let reason):
                throw RelayError("the relay refused a frame (\(reason.prefix(64)))", kind: RelayError.refused)
            case .waiting, .peerJoined, .other:
                continue
            }
        }
    }

    /// Leaves the room (the peer gets `peer-left`) and waits, briefly, for
    /// the relay to end the connection; idempotent.
    public func close() async {
        await link.leave()
    }
}

extension RelayRoom: CustomStringConvertible {
    /// The start of the room ID and whether the peer is in.
    public var description: String { "RelayRoom(\(roomID.prefix(8))..., peer: \(peerPresent ? "yes" : "no"))" }
}

/// The connection under a room or a group room: a RoomSocket on its channel
/// (behind TLS for a wss:// relay) and the inbox it fills. It opens the
/// WebSocket, sends frames and leaves; RelayRoom and GroupRoom read the
/// inbox and give its items their meaning.
final class RoomLink: @unchecked Sendable {
    let inbox: RoomInbox
    private let channel: any Channel
    private let socket: RoomSocket
    private let lock = NSLock()
    private var left = false

    private init(inbox: RoomInbox, channel: any Channel, socket: RoomSocket) {
        self.inbox = inbox
        self.channel = channel
        self.socket = socket
    }

    deinit {
        // A room dropped without leaving ends its connection.
        channel.close(promise: nil)
    }

    /// Opens the WebSocket of `path` (below the URL's path prefix) at `url`,
    /// waiting at most `timeout` seconds. `what` names the room in errors
    /// ("the room"); messages up to `maxMessage` bytes are taken, at most
    /// `maxQueued` of them waiting unread. A relay that refuses the upgrade
    /// gives `"connection"` (or `"busy"`, `"rate-limited"`) with its HTTP
    /// status.
    static func open(
        _ url: RelayURL, path: String, what: String, maxMessage: Int, maxQueued: Int, timeout: Double,
        eventLoopGroup: any EventLoopGroup
    ) async throws -> RoomLink {
        let deadline = Deadline(seconds: try Checks.seconds(timeout, "timeout"))
        let sslContext: NIOSSLContext? = try url.isSecure ? url.makeSSLContext() : nil
        let inbox = RoomInbox(maxQueued: maxQueued)
        let socket = RoomSocket(inbox: inbox, host: url.hostHeader, path: url.pathPrefix + path, maxMessage: maxMessage)
        let serverName = url.serverName
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: eventLoopGroup)
                .connectTimeout(Deadline.amount(max(deadline.remaining, 0.001)))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(
                                NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                        }
                        try channel.pipeline.syncOperations.addHandler(socket)
                    }
                }
                .connect(host: url.host, port: url.port).get()
        } catch {
            throw HTTPRequester.connectError(error, url)
        }
        let first: RoomInbox.Next
        do {
            first = try await inbox.next(timeout: deadline.remaining)
        } catch {
            channel.close(promise: nil)
            throw error
        }
        switch first {
        case .opened:
            return RoomLink(inbox: inbox, channel: channel, socket: socket)
        case .timedOut:
            channel.close(promise: nil)
            throw RelayError.timeout("the relay at \(url.place) did not open \(what) in time")
        case .ended(let end):
            channel.close(promise: nil)
            switch end {
            case .closed: throw RelayError.connection("the relay at \(url.place) closed the connection before \(what) opened")
            case .failed(let error as RelayError): throw error
            case .failed(let error):
                if let tls = await TLSFailure.explain(
                    error, url: url, context: sslContext, group: eventLoopGroup, timeout: deadline.remaining)
                {
                    throw RelayError(tls, kind: "connection")
                }
                throw RelayError.connection("cannot join \(what) on the relay at \(url.place) (\(HTTPRequester.describe(error)))")
            }
        case .binary, .text:
            // The socket's first item is always `opened`.
            channel.close(promise: nil)
            throw RelayError.badResponse("the room connection started with a frame")
        }
    }

    /// Writes `frame` (a binary message or a ping). Once the connection has
    /// ended, throws `ended` of how; once left, `"closed"`.
    func send(_ frame: ByteBuffer, ended: (RoomInbox.End) -> RelayError) async throws {
        guard !lock.withLock({ left }) else { throw RelayError("the room was left", kind: "closed") }
        if let end = inbox.end { throw ended(end) }
        do {
            try await channel.writeAndFlush(frame).get()
        } catch {
            if let end = inbox.end { throw ended(end) }
            throw RelayError("the room connection is closed (\(HTTPRequester.describe(error)))", kind: "closed")
        }
    }

    /// Leaves the room (the peers get `peer-left`) and waits, briefly, for
    /// the relay to end the connection; idempotent.
    func leave() async {
        let first = lock.withLock {
            defer { left = true }
            return !left
        }
        guard first else { return }
        if inbox.end == nil {
            let socket = socket
            channel.eventLoop.execute { socket.startClose(code: UInt16(RoomCloseCode.normal)) }
            // The relay answers the close and ends the connection; wait for
            // that, at most 2 seconds, then cut it.
            let deadline = Deadline(seconds: 2)
            while inbox.end == nil, !deadline.hasPassed {
                if case .timedOut = (try? await inbox.next(timeout: deadline.remaining)) ?? .timedOut { break }
            }
        }
        try? await channel.close()
    }
}

/// The connection's items, from its event loop to the task that reads the
/// room: a queue with a single waiting reader, whose
/// wait ends at a deadline or on cancellation without ending the queue.
final class RoomInbox: @unchecked Sendable {
    enum End {
        /// The relay closed the connection, with this code if it gave one.
        case closed(code: Int?)
        case failed(any Error)
    }

    enum Item {
        case opened
        case binary([UInt8])
        case text(String)
    }

    enum Next {
        case opened
        case binary([UInt8])
        case text(String)
        case ended(End)
        case timedOut
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Next, any Error>
        var timer: Scheduled<Void>?
    }

    private let lock = NSLock()
    private var queue: [Item] = []
    private var head = 0
    private var ended: End?
    private var waiter: Waiter?
    private var nextID: UInt64 = 0

    /// How the connection ended, once it has.
    var end: End? { lock.withLock { ended } }

    /// The most items a room keeps unread: the protocols carried through a
    /// room need a handful, so a peer that sends more is cut off.
    static let maxQueued = 256

    /// The most items this inbox keeps unread.
    let maxQueued: Int

    init(maxQueued: Int = RoomInbox.maxQueued) {
        self.maxQueued = maxQueued
    }

    /// Queues `item` (or hands it to the waiting reader); false once the
    /// connection should end: it has ended, or too much arrived unread.
    @discardableResult
    func push(_ item: Item) -> Bool {
        lock.lock()
        guard ended == nil else {
            lock.unlock()
            return false
        }
        if let w = waiter {
            waiter = nil
            lock.unlock()
            w.timer?.cancel()
            w.continuation.resume(returning: Self.next(item))
            return true
        }
        guard queue.count - head < maxQueued else {
            lock.unlock()
            finish(.failed(RelayError.badResponse("more than \(maxQueued) frames arrived unread")))
            return false
        }
        queue.append(item)
        lock.unlock()
        return true
    }

    func finish(_ end: End) {
        lock.lock()
        let result = ended ?? end
        ended = result
        let w = waiter
        waiter = nil
        lock.unlock()
        w?.timer?.cancel()
        w?.continuation.resume(returning: .ended(result))
    }

    private static func next(_ item: Item) -> Next {
        switch item {
        case .opened: return .opened
        case .binary(let bytes): return .binary(bytes)
        case .text(let text): return .text(text)
        }
    }

    /// What is queued, else the end, else the next item within `timeout`
    /// seconds (`.timedOut` otherwise). Throws `CancellationError` if the
    /// task is cancelled while waiting (the queue is left as it was).
    func next(timeout: Double) async throws -> Next {
        let id: UInt64 = lock.withLock {
            nextID += 1
            return nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Next, any Error>) in
                lock.lock()
                if let ready = takeLocked() {
                    lock.unlock()
                    return continuation.resume(returning: ready)
                }
                if Task.isCancelled {
                    lock.unlock()
                    return continuation.resume(throwing: CancellationError())
                }
                if timeout <= 0 {
                    lock.unlock()
                    return continuation.resume(returning: .timedOut)
                }
                if let other = waiter {
                    // One reader at a time: the earlier wait gives way.
                    waiter = nil
                    other.timer?.cancel()
                    other.continuation.resume(throwing: ItsMeError(.invalidState, "another task is reading this room"))
                }
                waiter = Waiter(id: id, continuation: continuation, timer: nil)
                lock.unlock()
                let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: Deadline.amount(timeout)) { [weak self] () -> Void in
                    self?.expire(id, with: nil)
                }
                lock.withLock {
                    if waiter?.id == id { waiter?.timer = timer } else { timer.cancel() }
                }
            }
        } onCancel: {
            self.expire(id, with: CancellationError())
        }
    }

    /// Ends wait `id`: with `error`, or as timed out.
    private func expire(_ id: UInt64, with error: (any Error)?) {
        lock.lock()
        guard let w = waiter, w.id == id else { return lock.unlock() }
        waiter = nil
        lock.unlock()
        w.timer?.cancel()
        if let error { w.continuation.resume(throwing: error) } else { w.continuation.resume(returning: .timedOut) }
    }

    private func takeLocked() -> Next? {
        if head < queue.count {
            let item = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            return Self.next(item)
        }
        if let ended { return .ended(ended) }
        return nil
    }
}
