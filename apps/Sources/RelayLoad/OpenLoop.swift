// The load generator of the open-loop latency phase: one thread, epoll and
// plain non-blocking sockets, no event-loop framework. Frames arrive at the
// relay one at a time here, so every frame costs a write and a read on each
// side, and the generator shares the machine with the relay: what it spends
// per frame is taken from the relay. It does only what a frame needs (its
// RFC 6455 framing, two clock reads, a histogram entry), about a third less
// CPU per frame than the event-loop workers of the other phases.
// Its frames are read and written in raw memory, not NIO's ByteBuffer, so
// it keeps its own few lines of RFC 6455 framing; the upgrade request is
// WebSocketWire's.
#if os(Linux)
import CEpoll
import Glibc
import WebSocketWire
import ItsMeRelayProtocol

final class OpenLoopGenerator {
    private let port: Int
    private let epoll: Int32
    /// Connection `i` is side `i % 2` of room `i / 2`: a0, b0, a1, b1, ...
    private var fds: [Int32] = []
    /// Bytes read and not yet parsed, `bufferSize` per connection.
    private var buffers: UnsafeMutablePointer<UInt8>
    private var lengths: [Int] = []
    private var upgraded: [Bool] = []
    /// Sides of each room that saw `peer-joined`.
    private var joined: [UInt8] = []
    /// Bytes a write could not take at once (not expected at these rates).
    private var pending: [[UInt8]] = []
    private var closing = false
    private var random = FastRandom(seed: monoNanos())
    private(set) var stats = WorkerStats()
    private var recordFrom: UInt64 = .max
    private var recordUntil: UInt64 = 0

    private static let bufferSize = 8192
    private static let timerTag = UInt64.max

    init(port: Int) {
        self.port = port
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        buffers = .allocate(capacity: 1)
    }

    deinit {
        closeAll()
        buffers.deallocate()
        Glibc.close(epoll)
    }

    /// Opens `rooms` rooms (two connections each) and waits until both
    /// sides of every room saw `peer-joined`; nil, or what went wrong.
    func open(rooms: Int, seconds: Double = 30) -> String? {
        let count = rooms * 2
        buffers.deallocate()
        buffers = .allocate(capacity: count * Self.bufferSize)
        fds = []
        lengths = Array(repeating: 0, count: count)
        upgraded = Array(repeating: false, count: count)
        joined = Array(repeating: 0, count: rooms)
        pending = Array(repeating: [], count: count)
        closing = false
        stats = WorkerStats()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        for index in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return "socket: \(String(cString: strerror(errno)))" }
            fds.append(fd)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { return "connect: \(String(cString: strerror(errno)))" }
            if index % 2 == 0 { roomNames.append(randomID()) }
            let request = WebSocketWire.upgradeRequest(
                host: "127.0.0.1:\(port)", path: RelayPath.room(roomNames[index / 2]).text, key: WebSocketWire.newKey())
            let bytes = Array(request.utf8)
            guard bytes.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
                return "sending the upgrade request: \(String(cString: strerror(errno)))"
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            event.data.u64 = UInt64(index)
            guard epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else { return "epoll_ctl: \(String(cString: strerror(errno)))" }
            // The first side waits for the second: a room at a time.
            if index % 2 == 1 { _ = pump(until: { self.joined[index / 2] == 2 || self.stats.failures > 0 }, seconds: seconds) }
            if let failure = stats.firstFailure { return failure }
        }
        guard pump(until: { self.stats.readyRooms == rooms || self.stats.failures > 0 }, seconds: seconds) else {
            return "only \(stats.readyRooms) of \(rooms) rooms joined within \(Int(seconds)) s"
        }
        return stats.firstFailure
    }

    private var roomNames: [String] = []

    /// Sends `total` frames at `interval` ns from `start`, round robin over
    /// the connections, reading what arrives, until every frame came back
    /// or `drain` seconds after the schedule ends; latency is recorded for
    /// frames intended within [recordFrom, recordUntil).
    func run(start: UInt64, interval: Double, total: Int, recordFrom: UInt64, recordUntil: UInt64, drain: Double) -> WorkerStats {
        let keep = stats
        stats = WorkerStats()
        stats.opened = keep.opened
        stats.readyRooms = keep.readyRooms
        stats.scheduleDone = false
        self.recordFrom = recordFrom
        self.recordUntil = recordUntil
        let timer = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        defer { Glibc.close(timer) }
        // A tick every 250 us from `start`: at 100,000 frames/s a wake-up
        // per frame would cost the generator more than the frames. A frame
        // sent up to a tick late is charged that lateness: its latency
        // runs from its intended time.
        var spec = itimerspec()
        spec.it_value = timespec(tv_sec: Int(start / 1_000_000_000), tv_nsec: Int(start % 1_000_000_000))
        spec.it_interval = timespec(tv_sec: 0, tv_nsec: 250_000)
        timerfd_settime(timer, Int32(TFD_TIMER_ABSTIME), &spec, nil)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = Self.timerTag
        epoll_ctl(epoll, EPOLL_CTL_ADD, timer, &event)
        defer { epoll_ctl(epoll, EPOLL_CTL_DEL, timer, nil) }

        var next = 0
        let end = start + UInt64(Double(total) * interval)
        let deadline = end + UInt64(drain * 1e9)
        var frame = [UInt8](repeating: 0, count: 70)
        _ = pump(until: {
            if next >= total { self.stats.scheduleDone = true }
            return (next >= total && self.stats.received >= self.stats.sent) || self.stats.failures > 0 || monoNanos() > deadline
        }, seconds: Double(deadline - min(deadline, monoNanos())) / 1e9 + 1) { now in
            var ticks: UInt64 = 0
            _ = read(timer, &ticks, 8)
            while next < total {
                let intended = start + UInt64(Double(next) * interval)
                if intended > now { break }
                self.send(frame: &frame, to: next % self.fds.count, intended: intended, now: now)
                next += 1
            }
        }
        return stats
    }

    /// Closes every connection (a close frame first).
    func closeAll() {
        closing = true
        for (index, fd) in fds.enumerated() where fd >= 0 {
            let close: [UInt8] = [0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8]
            _ = close.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            Glibc.close(fd)
            fds[index] = -1
        }
        fds = []
        roomNames = []
    }

    // MARK: - the loop

    /// Waits for events and handles them until `done` or `seconds` pass;
    /// `onTick` runs with the time of each timer expiry. Whether `done`.
    private func pump(until done: () -> Bool, seconds: Double, onTick: ((UInt64) -> Void)? = nil) -> Bool {
        let deadline = monoNanos() + UInt64(max(seconds, 0) * 1e9)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while !done() {
            if monoNanos() > deadline { return false }
            let n = events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, Int32($0.count), 50) }
            if n < 0 {
                if errno == EINTR { continue }
                note("epoll_wait: \(String(cString: strerror(errno)))")
                return false
            }
            for k in 0..<Int(n) {
                let tag = events[k].data.u64
                if tag == Self.timerTag {
                    onTick?(monoNanos())
                    continue
                }
                let index = Int(tag)
                if events[k].events & EPOLLOUT.rawValue != 0 { flushPending(index) }
                if events[k].events & (EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { receive(index) }
            }
        }
        return true
    }

    // MARK: - sending

    /// A 64-byte binary frame, masked (as a client must): the intended and
    /// the actual send time (little-endian nanoseconds), then filler.
    @inline(__always)
    private func send(frame: inout [UInt8], to index: Int, intended: UInt64, now: UInt64) {
        guard fds[index] >= 0 else { return }
        let mask = UInt32(truncatingIfNeeded: random.next())
        frame.withUnsafeMutableBytes { raw in
            raw[0] = 0x82
            raw[1] = 0x80 | 64
            raw.storeBytes(of: mask, toByteOffset: 2, as: UInt32.self)
            raw.storeBytes(of: intended.littleEndian, toByteOffset: 6, as: UInt64.self)
            raw.storeBytes(of: now.littleEndian, toByteOffset: 14, as: UInt64.self)
            for i in 22..<70 { raw[i] = 0x5a }
            let wide = UInt64(mask) | UInt64(mask) << 32
            var i = 6
            while i < 70 {
                let word = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                raw.storeBytes(of: word ^ wide, toByteOffset: i, as: UInt64.self)
                i += 8
            }
        }
        stats.sent &+= 1
        if intended < stats.firstSend { stats.firstSend = intended }
        let lag = now &- intended
        if intended >= recordFrom && intended < recordUntil { stats.sendLag.record(lag) }
        if lag > stats.maxSendLag { stats.maxSendLag = lag }
        write(frame, to: index)
    }

    private func write(_ bytes: [UInt8], to index: Int) {
        if !pending[index].isEmpty {
            pending[index].append(contentsOf: bytes)
            return
        }
        let written = bytes.withUnsafeBytes { Glibc.send(fds[index], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if written == bytes.count { return }
        if written < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
            if !closing { note("send: \(String(cString: strerror(errno)))") }
            return
        }
        pending[index].append(contentsOf: bytes[max(written, 0)...])
        watchWritable(index, true)
    }

    private func flushPending(_ index: Int) {
        let bytes = pending[index]
        pending[index] = []
        guard !bytes.isEmpty else { return watchWritable(index, false) }
        let written = bytes.withUnsafeBytes { Glibc.send(fds[index], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if written == bytes.count { return watchWritable(index, false) }
        if written < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
            if !closing { note("send: \(String(cString: strerror(errno)))") }
            return
        }
        pending[index] = Array(bytes[max(written, 0)...])
    }

    private func watchWritable(_ index: Int, _ on: Bool) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (on ? EPOLLOUT.rawValue : 0)
        event.data.u64 = UInt64(index)
        epoll_ctl(epoll, EPOLL_CTL_MOD, fds[index], &event)
    }

    // MARK: - receiving

    private func receive(_ index: Int) {
        let fd = fds[index]
        guard fd >= 0 else { return }
        let base = buffers + index * Self.bufferSize
        let room = Self.bufferSize - lengths[index]
        guard room > 0 else { return fail(index, "a frame larger than \(Self.bufferSize) bytes") }
        let got = recv(fd, base + lengths[index], room, 0)
        if got == 0 {
            if !closing { stats.unexpectedCloses += 1 }
            epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
            return
        }
        if got < 0 {
            if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR { fail(index, "recv: \(String(cString: strerror(errno)))") }
            return
        }
        lengths[index] += got
        var offset = 0
        if !upgraded[index] {
            guard let end = headEnd(base, lengths[index]) else { return }
            let head = String(decoding: UnsafeBufferPointer(start: base, count: end), as: UTF8.self)
            let status = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? head
            guard status.hasPrefix("HTTP/1.1 101") else { return fail(index, "upgrade refused: \(status)") }
            upgraded[index] = true
            stats.opened += 1
            offset = end
        }
        offset = frames(index, base, from: offset, to: lengths[index])
        if offset > 0 {
            let left = lengths[index] - offset
            if left > 0 { (base).update(from: base + offset, count: left) }
            lengths[index] = left
        }
    }

    /// Parses whole frames in base[from..<to]; returns where the first
    /// partial frame starts.
    private func frames(_ index: Int, _ base: UnsafeMutablePointer<UInt8>, from: Int, to: Int) -> Int {
        var at = from
        while to - at >= 2 {
            let b0 = base[at], b1 = base[at + 1]
            guard b1 & 0x80 == 0 else {
                fail(index, "a masked frame from the relay")
                return at
            }
            var length = Int(b1 & 0x7f)
            var header = 2
            if length == 126 {
                guard to - at >= 4 else { break }
                length = Int(base[at + 2]) << 8 | Int(base[at + 3])
                header = 4
            } else if length == 127 {
                guard to - at >= 10 else { break }
                length = (0..<8).reduce(0) { $0 << 8 | Int(base[at + 2 + $1]) }
                header = 10
            }
            guard to - at >= header + length else { break }
            let payload = UnsafeBufferPointer(start: base + at + header, count: length)
            switch b0 & 0x0f {
            case 0x2:
                guard length >= 16 else {
                    note("short binary frame")
                    break
                }
                let raw = UnsafeRawBufferPointer(payload)
                arrived(UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self)),
                        UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            case 0x1:
                let text = String(decoding: payload, as: UTF8.self)
                if text.contains("\"peer-joined\"") {
                    joined[index / 2] += 1
                    if joined[index / 2] == 2 { stats.readyRooms += 1 }
                } else if text.contains("\"peer-left\"") {
                    if !closing { note("peer-left during the run") }
                } else if !text.contains("\"waiting\"") {
                    note("relay said: \(text.prefix(200))")
                }
            case 0x9:
                // The relay's keep-alive: answered with the same payload.
                var pong: [UInt8] = [0x8a, 0x80 | UInt8(length), 0, 0, 0, 0]
                pong.append(contentsOf: payload)
                write(pong, to: index)
            case 0xa:
                break
            case 0x8:
                let code = length >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : 1005
                if !closing { stats.closeCodes[code, default: 0] += 1 }
                epoll_ctl(epoll, EPOLL_CTL_DEL, fds[index], nil)
                return at + header + length
            default:
                fail(index, "opcode \(b0 & 0x0f) from the relay")
                return at
            }
            at += header + length
        }
        return at
    }

    @inline(__always)
    private func arrived(_ intended: UInt64, _ actual: UInt64) {
        let now = monoNanos()
        stats.received &+= 1
        stats.lastReceive = now
        guard intended >= recordFrom && intended < recordUntil && now >= actual else { return }
        stats.histogram.record(now - intended)
        stats.transit.record(now - actual)
        let second = Int((intended - recordFrom) / 1_000_000_000)
        while stats.perSecond.count <= second { stats.perSecond.append(Histogram()) }
        stats.perSecond[second].record(now - intended)
    }

    private func headEnd(_ base: UnsafeMutablePointer<UInt8>, _ count: Int) -> Int? {
        guard count >= 4 else { return nil }
        for i in 3..<count where base[i] == 10 && base[i - 1] == 13 && base[i - 2] == 10 && base[i - 3] == 13 {
            return i + 1
        }
        return nil
    }

    private func fail(_ index: Int, _ why: String) {
        if closing { return }
        note(why)
        if fds[index] >= 0 { epoll_ctl(epoll, EPOLL_CTL_DEL, fds[index], nil) }
    }

    private func note(_ why: String) {
        stats.failures += 1
        if stats.firstFailure == nil { stats.firstFailure = why }
    }
}
#else
/// The benchmark reads /proc and its latency phase uses epoll: Linux only.
final class OpenLoopGenerator {
    init(port: Int) {}
    func open(rooms: Int, seconds: Double = 30) -> String? { "the open-loop generator needs Linux (epoll)" }
    func run(start: UInt64, interval: Double, total: Int, recordFrom: UInt64, recordUntil: UInt64, drain: Double) -> WorkerStats {
        WorkerStats()
    }
    func closeAll() {}
}
#endif
