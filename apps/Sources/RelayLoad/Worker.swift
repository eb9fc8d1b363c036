// One worker per event loop: it owns the rooms (both connections of a room
// live on the same loop), drives the sending of a phase and counts what
// arrives. Everything runs on the loop, so nothing is locked per frame; the
// main thread reads the counters between phases with `loop.submit`.
import NIOCore
import NIOPosix
import NIOSSL
import ItsMeRelayProtocol

/// One room of the load: its two connections (sides 0 and 1) and what each
/// sent and received. Made on the main thread, then touched only on its
/// worker's event loop.
final class LoadRoom: @unchecked Sendable {
    let index: Int
    let transport: Transport
    /// Room ID (relay) or nameplate (wormhole).
    let name: String
    var a: WSConn!
    var b: WSConn!
    /// Sides that are ready to send (relay: saw `peer-joined`; wormhole:
    /// the mailbox `open` was acknowledged).
    var ready = 0
    var sentA = 0, sentB = 0
    var receivedA = 0, receivedB = 0
    var mailbox: String?

    init(index: Int, transport: Transport, name: String) {
        self.index = index
        self.transport = transport
        self.name = name
    }

    @inline(__always) func sent(_ side: Int) -> Int { side == 0 ? sentA : sentB }
    @inline(__always) func received(_ side: Int) -> Int { side == 0 ? receivedA : receivedB }
}

/// What one worker reports to the main thread.
struct WorkerStats: Sendable {
    var opened = 0
    var readyRooms = 0
    var failures = 0
    var firstFailure: String?
    var unexpectedCloses = 0
    var closeCodes: [Int: Int] = [:]
    var sent: UInt64 = 0
    var received: UInt64 = 0
    var completedSides = 0
    var firstSend: UInt64 = .max
    var lastReceive: UInt64 = 0
    var maxSendLag: UInt64 = 0
    var scheduleDone = true
    /// Arrival minus intended send time (what a user waits).
    var histogram = Histogram()
    /// Arrival minus the time the frame was actually written (the relay
    /// and the loopback, without the generator's own lag in sending).
    var transit = Histogram()
    /// Actual minus intended send time (the generator's own lag).
    var sendLag = Histogram()
    /// `histogram` per second of intended send time from recordFrom.
    var perSecond: [Histogram] = []
}

final class Worker: @unchecked Sendable {
    let loop: EventLoop
    let index: Int
    var random: FastRandom
    var dirty: [WSConn] = []
    private(set) var rooms: [LoadRoom] = []
    private var connections: [WSConn] = []

    private var stats = WorkerStats()
    /// Latencies are recorded for frames intended within [recordFrom, recordUntil).
    private var recordFrom: UInt64 = .max
    private var recordUntil: UInt64 = 0
    /// Closed-loop sending: each side keeps `window` frames in flight, up to
    /// `target` frames per side (0: no bound).
    private var sending = false
    private var target = 0
    // Open-loop schedule.
    private var scheduleStart: UInt64 = 0
    private var scheduleInterval: Double = 0
    private var scheduleNext = 0
    private var scheduleTotal = 0

    /// The shortest time between two sending rounds of the open-loop schedule.
    static let tick: UInt64 = 250_000

    init(loop: EventLoop, index: Int) {
        self.loop = loop
        self.index = index
        random = FastRandom(seed: UInt64(index + 1) &* 0x9e37_79b9_7f4a_7c15 ^ monoNanos())
    }

    // MARK: - main-thread entry points (each runs on the loop)

    func snapshot() -> EventLoopFuture<WorkerStats> {
        loop.submit { self.stats }
    }

    func resetStats() -> EventLoopFuture<Void> {
        loop.submit {
            let keep = self.stats
            self.stats = WorkerStats()
            self.stats.opened = keep.opened
            self.stats.readyRooms = keep.readyRooms
        }
    }

    /// Opens both connections of each room (to `port` on 127.0.0.1).
    /// `tls`: connect with TLS (to measure the relay's memory per TLS
    /// connection).
    func open(_ newRooms: [LoadRoom], port: Int, tls: NIOSSLContext? = nil, path: @escaping @Sendable (LoadRoom) -> String)
        -> EventLoopFuture<Void>
    {
        loop.submit {
            let address = try! SocketAddress(ipAddress: "127.0.0.1", port: port)
            for room in newRooms {
                self.rooms.append(room)
                room.a = WSConn(worker: self, room: room, side: 0, path: path(room), host: "127.0.0.1:\(port)")
                room.b = WSConn(worker: self, room: room, side: 1, path: path(room), host: "127.0.0.1:\(port)")
                self.connections.append(room.a)
                self.connections.append(room.b)
                self.connect(room.a, address, tls: tls)
                self.connect(room.b, address, tls: tls)
            }
        }
    }

    private func connect(_ conn: WSConn, _ address: SocketAddress, tls: NIOSSLContext?) {
        ClientBootstrap(group: loop)
            .connectTimeout(.seconds(30))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: nil))
                    }
                    try channel.pipeline.syncOperations.addHandler(conn)
                }
            }
            .connect(to: address)
            .whenFailure { error in
                self.connectionFailed(conn, "connect: \(error)")
            }
    }

    /// Closed loop: every ready side sends `window` frames, then one more for
    /// each of its frames that arrives, until `perSide` frames (0: until
    /// stopped).
    func startClosedLoop(window: Int, perSide: Int, record: Bool) -> EventLoopFuture<Void> {
        loop.submit {
            self.sending = true
            self.target = perSide
            if record {
                self.recordFrom = 0
                self.recordUntil = .max
            }
            let now = monoNanos()
            for room in self.rooms where room.ready == 2 {
                for _ in 0..<window {
                    if perSide == 0 || room.sentA < perSide { self.send(room.a, intended: now, actual: now) }
                    if perSide == 0 || room.sentB < perSide { self.send(room.b, intended: now, actual: now) }
                }
            }
            self.flushDirty()
        }
    }

    func stopSending() -> EventLoopFuture<Void> {
        loop.submit { self.sending = false }
    }

    /// Open loop: `total` frames at fixed intervals from `start`, round robin
    /// over this worker's connections; latency recorded for frames intended
    /// within [recordFrom, recordUntil).
    func startOpenLoop(start: UInt64, interval: Double, total: Int, recordFrom: UInt64, recordUntil: UInt64) -> EventLoopFuture<Void> {
        loop.submit {
            self.sending = false
            self.recordFrom = recordFrom
            self.recordUntil = recordUntil
            self.scheduleStart = start
            self.scheduleInterval = interval
            self.scheduleNext = 0
            self.scheduleTotal = total
            self.stats.scheduleDone = total == 0
            if total > 0 { self.scheduleTick() }
        }
    }

    private func scheduleTick() {
        let now = monoNanos()
        let elapsed = now >= scheduleStart ? Double(now - scheduleStart) : -1
        let due = elapsed < 0 ? 0 : min(scheduleTotal, Int(elapsed / scheduleInterval) + 1)
        if !connections.isEmpty {
            while scheduleNext < due {
                let intended = scheduleStart + UInt64(Double(scheduleNext) * scheduleInterval)
                let conn = connections[scheduleNext % connections.count]
                if conn.state == .open {
                    send(conn, intended: intended, actual: now)
                    let lag = now &- intended
                    if intended >= recordFrom && intended < recordUntil { stats.sendLag.record(lag) }
                    if lag > stats.maxSendLag { stats.maxSendLag = lag }
                }
                scheduleNext += 1
            }
            flushDirty()
        } else {
            scheduleNext = scheduleTotal
        }
        if scheduleNext >= scheduleTotal {
            stats.scheduleDone = true
            return
        }
        // Ticks at least `Self.tick` apart: at 100,000 frames/s a tick per
        // frame (a timer, a wake-up and a flush each) would cost the
        // generator more than the frames. A frame sent up to one tick late
        // is charged that lateness: latency runs from its intended time.
        let next = scheduleStart + UInt64(Double(scheduleNext) * scheduleInterval)
        loop.scheduleTask(deadline: .uptimeNanoseconds(max(next, now + Self.tick))) { self.scheduleTick() }
    }

    /// Closes every connection of the current rooms.
    func closeAll() -> EventLoopFuture<Void> {
        loop.submit {
            self.sending = false
            for conn in self.connections { conn.close() }
            self.connections = []
            self.rooms = []
            self.dirty = []
        }
    }

    // MARK: - sending and receiving (on the loop)

    @inline(__always)
    private func send(_ conn: WSConn, intended: UInt64, actual: UInt64) {
        let room = conn.room
        if conn.side == 0 { room.sentA += 1 } else { room.sentB += 1 }
        stats.sent &+= 1
        if intended < stats.firstSend { stats.firstSend = intended }
        switch room.transport {
        case .relay:
            conn.queueBinary(intended: intended, actual: actual, mask: UInt32(truncatingIfNeeded: random.next()))
        case .wormhole:
            let seq = room.sent(conn.side)
            var payload = [UInt8](repeating: 0x5a, count: 64)
            for i in 0..<8 {
                payload[i] = UInt8(truncatingIfNeeded: intended >> UInt64(8 * i))
                payload[8 + i] = UInt8(truncatingIfNeeded: actual >> UInt64(8 * i))
            }
            conn.queueText("{\"type\": \"add\", \"phase\": \"\(seq)\", \"body\": \"\(hex(payload))\", \"id\": \"\(seq)\"}")
        }
    }

    func flushDirty() {
        guard !dirty.isEmpty else { return }
        let pending = dirty
        dirty.removeAll(keepingCapacity: true)
        for conn in pending { conn.flush() }
    }

    @inline(__always)
    private func frameArrived(_ conn: WSConn, intended: UInt64, actual: UInt64) {
        let now = monoNanos()
        let room = conn.room
        stats.received &+= 1
        stats.lastReceive = now
        if intended >= recordFrom && intended < recordUntil && now >= actual {
            stats.histogram.record(now - intended)
            stats.transit.record(now - actual)
            if recordUntil != .max {
                let second = Int((intended - recordFrom) / 1_000_000_000)
                while stats.perSecond.count <= second { stats.perSecond.append(Histogram()) }
                stats.perSecond[second].record(now - intended)
            }
        }
        let got: Int
        if conn.side == 0 { room.receivedA += 1; got = room.receivedA } else { room.receivedB += 1; got = room.receivedB }
        if target > 0 && got == target { stats.completedSides += 1 }
        if sending {
            let sender = conn.peer
            if target == 0 || room.sent(sender.side) < target { send(sender, intended: now, actual: now) }
        }
    }

    func binaryReceived(_ conn: WSConn, _ payload: ByteBuffer) {
        guard let intended = payload.getInteger(at: payload.readerIndex, endianness: .little, as: UInt64.self),
              let actual = payload.getInteger(at: payload.readerIndex + 8, endianness: .little, as: UInt64.self) else {
            return note("short binary frame")
        }
        frameArrived(conn, intended: intended, actual: actual)
    }

    func textReceived(_ conn: WSConn, _ payload: ByteBuffer) {
        let room = conn.room
        payload.withUnsafeReadableBytes { raw in
            let text = UnsafeBufferPointer(start: raw.baseAddress?.assumingMemoryBound(to: UInt8.self), count: raw.count)
            guard let type = jsonString(text, "type") else { return note("text frame without a type") }
            switch room.transport {
            case .relay:
                switch RoomEvent(json: text) {
                case .peerJoined?: sideReady(room)
                case .waiting?: break // first in the room
                case .peerLeft?: if !conn.closing { note("peer-left during the run") }
                default: note("relay said: \(String(decoding: text.prefix(200), as: UTF8.self))")
                }
            case .wormhole:
                wormholeMessage(conn, type, text)
            }
        }
    }

    private func sideReady(_ room: LoadRoom) {
        room.ready += 1
        if room.ready == 2 { stats.readyRooms += 1 }
    }

    private func wormholeMessage(_ conn: WSConn, _ type: UnsafeBufferPointer<UInt8>.SubSequence, _ text: UnsafeBufferPointer<UInt8>) {
        let room = conn.room
        let side = conn.side == 0 ? "a\(room.index)" : "b\(room.index)"
        if type.elementsEqual("message".utf8) {
            guard let from = jsonString(text, "side") else { return note("wormhole message without a side") }
            if from.elementsEqual(side.utf8) { return }  // the echo of our own message
            guard let body = jsonString(text, "body"), body.count >= 32 else { return note("wormhole message without a body") }
            var times: [UInt64] = [0, 0]
            var i = body.startIndex
            for byte in 0..<16 {
                guard let hi = hexValue(body[i]), let lo = hexValue(body[i + 1]) else { return note("bad hex") }
                times[byte / 8] |= UInt64(hi << 4 | lo) << UInt64(8 * (byte % 8))
                i += 2
            }
            frameArrived(conn, intended: times[0], actual: times[1])
        } else if type.elementsEqual("ack".utf8) {
            if let id = jsonString(text, "id"), id.elementsEqual("open".utf8) { sideReady(room) }
        } else if type.elementsEqual("welcome".utf8) {
            conn.queueText("{\"type\": \"bind\", \"appid\": \"itsme-bench\", \"side\": \"\(side)\", \"id\": \"bind\"}")
            conn.queueText("{\"type\": \"claim\", \"nameplate\": \"\(room.name)\", \"id\": \"claim\"}")
        } else if type.elementsEqual("claimed".utf8) {
            guard let mailbox = jsonString(text, "mailbox") else { return note("claimed without a mailbox") }
            conn.queueText("{\"type\": \"open\", \"mailbox\": \"\(String(decoding: mailbox, as: UTF8.self))\", \"id\": \"open\"}")
        } else if type.elementsEqual("error".utf8) {
            connectionFailed(conn, "wormhole server: \(String(decoding: text.prefix(200), as: UTF8.self))")
        }
    }

    private func note(_ why: String) {
        stats.failures += 1
        if stats.firstFailure == nil { stats.firstFailure = why }
    }

    // MARK: - connection events

    func connectionOpened(_ conn: WSConn) {
        stats.opened += 1
    }

    func connectionFailed(_ conn: WSConn, _ why: String) {
        if conn.closing { return }
        note(why)
    }

    func closeReceived(_ conn: WSConn, code: Int?) {
        if conn.closing { return }
        stats.closeCodes[code ?? 1005, default: 0] += 1
    }

    func connectionEnded(_ conn: WSConn, wasOpen: Bool) {
        if conn.closing { return }
        if wasOpen {
            stats.unexpectedCloses += 1
        }
    }
}

/// The string value of `"key"` in flat JSON as Python's json.dumps writes it
/// (no escapes inside our values); nil if absent or not a string.
func jsonString(_ text: UnsafeBufferPointer<UInt8>, _ key: String) -> UnsafeBufferPointer<UInt8>.SubSequence? {
    let pattern = Array(("\"" + key + "\"").utf8)
    let n = text.count, m = pattern.count
    var i = 0
    while i + m <= n {
        if text[i] == pattern[0] && text[i..<(i + m)].elementsEqual(pattern) {
            var j = i + m
            while j < n && (text[j] == 0x20 || text[j] == 0x3a) { j += 1 }  // spaces and ':'
            guard j < n, text[j] == 0x22 else { return nil }
            let start = j + 1
            var end = start
            while end < n && text[end] != 0x22 { end += 1 }
            guard end < n else { return nil }
            return text[start..<end]
        }
        i += 1
    }
    return nil
}

@inline(__always)
private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case 0x30...0x39: return c - 0x30
    case 0x61...0x66: return c - 0x61 + 10
    case 0x41...0x46: return c - 0x41 + 10
    default: return nil
    }
}
