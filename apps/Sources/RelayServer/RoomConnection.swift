import NIOCore
import NIOWebSocket
import Synchronization

/// Why the relay closes a room connection: the close frame it sends.
enum RoomClose {
    /// Neither a binary message nor a ping for `--room-idle` seconds.
    case idle
    /// The relay is shutting down.
    case goingAway
    /// The relay's previous ping was not answered.
    case noPong
    /// A third peer.
    case full
    /// The other peer left (after `peer-left`).
    case peerLeft
    /// The answer to the peer's own close.
    case answer
    /// A text message: peers speak binary.
    case textMessage
    /// A binary message over `--max-frame`.
    case tooLarge
    /// A frame that breaks RFC 6455 (FrameRules).
    case failed(WebSocketErrorCode)

    var code: UInt16 {
        switch self {
        case .idle: return 4000
        case .goingAway, .noPong: return 1001
        case .full: return 4009
        case .peerLeft, .answer: return 1000
        case .textMessage: return 1003
        case .tooLarge: return 1009
        case .failed(let code):
            var buffer = ByteBuffer()
            buffer.write(webSocketErrorCode: code)
            return buffer.readInteger(as: UInt16.self) ?? 1002
        }
    }

    var reason: String {
        switch self {
        case .idle: return "idle"
        case .goingAway: return "relay shutting down"
        case .noPong: return "no pong"
        case .full: return "room full"
        case .peerLeft: return "peer left"
        case .answer, .failed: return ""
        case .textMessage: return "peers send binary frames only"
        case .tooLarge: return "message too large"
        }
    }
}

/// One peer's WebSocket connection in a room, from the upgrade on
/// (docs/PROTOCOL.md 15.3): the whole of the room's fast path.
///
/// It decodes the peer's frames straight from the read buffers, applies
/// `FrameRules`, and writes each binary message, unmasked and framed for
/// the other peer, into one buffer per read burst, which it hands to the
/// other peer's channel once the burst is read (channelReadComplete): one
/// hop to the other channel's event loop and one flush per burst, no task,
/// no lock, and no allocation per message beyond that buffer. A fragmented
/// message is gathered and forwarded whole. Pings are answered here and
/// count as activity; the relay's own pings (`keepAlive`) expect a pong.
///
/// Back-pressure: while the other peer's channel is not writable (its
/// socket buffer and NIO's high-water mark are full), this connection stops
/// asking for reads, so a fast sender cannot fill the relay's memory; it
/// resumes when the other side drains.
///
/// Order: messages go out in the order they were read, and when this peer
/// leaves (a close, the end of the stream, a broken rule) everything read
/// before is handed over first, then the other peer is told `peer-left`,
/// through the same queue of its event loop, so after them.
///
/// Closing, whatever the reason: a close frame, then the output is shut
/// (the client sees the end of the stream), then the connection ends when
/// the client ends its side or 5 seconds later. Input that arrives in the
/// meantime is read and dropped, so the close frame is never lost to a reset.
final class RoomConnection: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase { case open, closing, closed }

    /// The connection's event loop: every var below is touched only there.
    /// Calls from elsewhere (the other peer, the hub) go through `run`.
    let loop: any EventLoop
    /// The slice of the relay's pings this connection is in, and when it
    /// opened (uptime nanoseconds): its first ping comes an interval or
    /// more later (RoomHub.ping).
    let slot: Int
    let opened = NIODeadline.now().uptimeNanoseconds
    private let roomID: String
    private let hub: RoomHub
    /// A binary message passed or a ping came since the hub's last sweep.
    private let activity = Atomic<Bool>(false)

    private var context: ChannelHandlerContext?
    private var phase = Phase.open
    private var room: ServerRoom?
    private var peer: RoomConnection?
    /// Bytes of a frame not yet read whole.
    private var partial: ByteBuffer?
    /// The fragments of a binary message so far, unmasked.
    private var message: ByteBuffer?
    private var inMessage = false
    /// Frames for the other peer, read in this burst.
    private var burst: ByteBuffer?
    private var burstMessages = 0
    private var activeInBurst = false
    private var reading = false
    private var ownUnflushed = false
    private var peerWritable = true
    private var readHeld = false
    private var awaitingPong = false
    private var closeTimer: Scheduled<Void>?

    init(roomID: String, hub: RoomHub, loop: any EventLoop) {
        self.roomID = roomID
        self.hub = hub
        self.loop = loop
        slot = hub.nextSlot()
    }

    // MARK: Entry points from other threads

    /// Runs `body` on this connection's loop: at once if already there.
    @inline(__always)
    private func run(_ body: @escaping @Sendable () -> Void) {
        if loop.inEventLoop { body() } else { loop.execute(body) }
    }

    /// Closes the connection with the frame `why` calls for.
    func close(_ why: RoomClose) {
        run { self.closeOnLoop(why) }
    }

    /// The relay's ping; a connection still owing the previous pong is
    /// closed with 1001 (unless its reads are held by back-pressure, when
    /// the pong may be waiting unread).
    func keepAlive() {
        run {
            guard self.phase == .open else { return }
            if self.awaitingPong, !self.readHeld {
                self.closeOnLoop(.noPong)
                return
            }
            self.awaitingPong = true
            self.writeOwn(Self.frame(opcode: 0x9, payload: EmptyCollection()))
        }
    }

    /// Whether a binary message passed or a ping came since the last call.
    func takeActivity() -> Bool {
        activity.exchange(false, ordering: .relaxed)
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let (room, joined) = hub.join(roomID, self)
        self.room = room
        switch joined {
        case .alone:
            writeOwn(Self.waiting)
        case .paired(let first):
            peer = first
            writeOwn(Self.peerJoined)
            first.run { first.paired(with: self) }
        case .full:
            hub.metrics.reject("room-full")
            closeOnLoop(.full)
        case .shuttingDown:
            closeOnLoop(.goingAway)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        hub.forget(self)
        closeTimer?.cancel()
        closeTimer = nil
        self.context = nil
        peer = nil
        room = nil
        partial = nil
        message = nil
        burst = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeTimer?.cancel()
        if phase == .open {
            handOver()
            leaveRoom()
        }
        phase = .closed
        peer = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The end of the peer's stream: whatever it sent whole is
            // forwarded, then the room ends.
            if phase == .open {
                handOver()
                leaveRoom()
            }
            phase = .closed
            context.close(promise: nil)
            return
        }
        if event is ChannelShouldQuiesceEvent {
            closeOnLoop(.goingAway)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard phase == .open else { return }
        reading = true
        var input: ByteBuffer
        if var saved = partial {
            partial = nil
            var more = unwrapInboundIn(data)
            saved.writeBuffer(&more)
            input = saved
        } else {
            input = unwrapInboundIn(data)
        }
        let needed = decode(context, &input)
        if phase == .open, input.readableBytes > 0 {
            // Kept in a buffer of its own, sized for the whole frame, so
            // that the read buffer goes back to NIO's pool.
            var saved = Self.allocator.buffer(capacity: max(needed, input.readableBytes))
            saved.writeBuffer(&input)
            partial = saved
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        handOver()
        if ownUnflushed {
            ownUnflushed = false
            context.flush()
        }
    }

    /// While the other peer cannot take more, reads wait (back-pressure).
    func read(context: ChannelHandlerContext) {
        if phase == .open, peer != nil, !peerWritable {
            readHeld = true
            return
        }
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        if let peer { peer.run { peer.peerWritabilityChanged(writable) } }
        context.fireChannelWritabilityChanged()
    }

    /// Decodes whole frames from `input`; returns the size of the frame
    /// that has not all arrived (at least its header), if any.
    private func decode(_ context: ChannelHandlerContext, _ input: inout ByteBuffer) -> Int {
        while phase == .open {
            let available = input.readableBytes
            let start = input.readerIndex
            guard available >= 2, let b0 = input.getInteger(at: start, as: UInt8.self),
                let b1 = input.getInteger(at: start + 1, as: UInt8.self)
            else { return 2 }
            var length = UInt64(b1 & 0x7F)
            var headerLength = 2
            if length == 126 {
                guard let extended = input.getInteger(at: start + 2, as: UInt16.self) else { return 4 }
                length = UInt64(extended)
                headerLength = 4
            } else if length == 127 {
                guard let extended = input.getInteger(at: start + 2, as: UInt64.self) else { return 10 }
                length = extended
                headerLength = 10
            }
            let fin = b0 & 0x80 != 0
            let opcode = b0 & 0x0F
            if let code = FrameRules.violation(
                fin: fin, reserved: b0 & 0x70, opcode: opcode, masked: b1 & 0x80 != 0, length: length, inMessage: inMessage)
            {
                hub.metrics.reject("protocol-error")
                closeOnLoop(.failed(code))
                return 0
            }
            if opcode == 0x1 {
                hub.metrics.reject("bad-request")
                closeOnLoop(.textMessage)
                return 0
            }
            if opcode <= 0x2, length > UInt64(max(0, hub.maxFrame - (message?.readableBytes ?? 0))) {
                hub.metrics.reject("too-large")
                closeOnLoop(.tooLarge)
                return 0
            }
            // The length is now at most --max-frame, or 125 for a control frame.
            let payloadLength = Int(length)
            let total = headerLength + 4 + payloadLength
            guard available >= total else { return total }
            let key = input.withUnsafeReadableBytes { $0.loadUnaligned(fromByteOffset: headerLength, as: UInt32.self) }
            let payload = headerLength + 4
            switch opcode {
            case 0x2 where fin:
                if peer == nil {
                    refuseAlone()
                } else {
                    var out = burst ?? Self.allocator.buffer(capacity: max(available, total))
                    burst = nil
                    Self.writeHeader(&out, opcode: 0x2, length: payloadLength)
                    Self.appendUnmasked(&out, input, offset: payload, length: payloadLength, key: key)
                    burst = out
                    burstMessages += 1
                    activeInBurst = true
                }
            case 0x2, 0x0:
                var gathered = message ?? Self.allocator.buffer(capacity: payloadLength)
                message = nil
                Self.appendUnmasked(&gathered, input, offset: payload, length: payloadLength, key: key)
                inMessage = !fin
                if fin {
                    forward(gathered)
                } else {
                    message = gathered
                }
            case 0x9:
                var pong = Self.allocator.buffer(capacity: 2 + payloadLength)
                Self.writeHeader(&pong, opcode: 0xA, length: payloadLength)
                Self.appendUnmasked(&pong, input, offset: payload, length: payloadLength, key: key)
                writeOwn(pong)
                activeInBurst = true
            case 0xA:
                awaitingPong = false
            case 0x8:
                var body = Self.allocator.buffer(capacity: payloadLength)
                Self.appendUnmasked(&body, input, offset: payload, length: payloadLength, key: key)
                input.moveReaderIndex(forwardBy: total)
                if let code = FrameRules.check(close: body) {
                    hub.metrics.reject("protocol-error")
                    closeOnLoop(.failed(code))
                } else {
                    closeOnLoop(.answer)
                }
                return 0
            default:
                break
            }
            input.moveReaderIndex(forwardBy: total)
        }
        return 0
    }

    /// A whole gathered message, for the other peer.
    private func forward(_ gathered: ByteBuffer) {
        guard peer != nil, let context else {
            refuseAlone()
            return
        }
        var gathered = gathered
        var out = burst ?? Self.allocator.buffer(capacity: gathered.readableBytes + 10)
        burst = nil
        Self.writeHeader(&out, opcode: 0x2, length: gathered.readableBytes)
        out.writeBuffer(&gathered)
        burst = out
        burstMessages += 1
        activeInBurst = true
    }

    /// A binary message while alone: not forwarded, not activity.
    private func refuseAlone() {
        hub.metrics.reject("no-peer")
        writeOwn(Self.refusedNoPeer)
    }

    // MARK: Handing over to the other peer

    /// Hands this burst's messages to the other peer, and marks activity.
    private func handOver() {
        if activeInBurst {
            activeInBurst = false
            activity.store(true, ordering: .relaxed)
        }
        guard let out = burst else { return }
        let count = burstMessages
        burst = nil
        burstMessages = 0
        guard let peer else { return }
        // Both peers of a room usually share this loop: then the hand-over
        // is a call, with no closure to allocate.
        if peer.loop === loop {
            peer.deliver(out, count: count)
        } else {
            peer.loop.execute { peer.deliver(out, count: count) }
        }
    }

    /// The other peer's messages: written and flushed at once.
    private func deliver(_ frames: ByteBuffer, count: Int) {
        guard phase == .open, let context else { return }
        context.writeAndFlush(wrapOutboundOut(frames), promise: nil)
        hub.metrics.framesForwarded.increment(by: Int64(count))
    }

    private func paired(with other: RoomConnection) {
        guard phase == .open else { return }
        peer = other
        writeOwn(Self.peerJoined)
    }

    private func peerWritabilityChanged(_ writable: Bool) {
        peerWritable = writable
        resumeReading()
    }

    private func resumeReading() {
        guard readHeld, let context else { return }
        readHeld = false
        context.read()
    }

    // MARK: Leaving and closing

    private func leaveRoom() {
        guard let room else { return }
        self.room = nil
        if let other = hub.leave(room, self) {
            other.run { other.peerLeft() }
        }
    }

    private func peerLeft() {
        guard phase == .open else { return }
        writeOwn(Self.peerLeftEvent)
        closeOnLoop(.peerLeft)
    }

    private func closeOnLoop(_ why: RoomClose) {
        guard phase == .open, let context else { return }
        handOver()
        phase = .closing
        partial = nil
        message = nil
        leaveRoom()
        peer = nil
        var body = Self.allocator.buffer(capacity: 2 + why.reason.utf8.count)
        body.writeInteger(why.code)
        body.writeString(why.reason)
        var frame = Self.allocator.buffer(capacity: 4 + body.readableBytes)
        Self.writeHeader(&frame, opcode: 0x8, length: body.readableBytes)
        frame.writeBuffer(&body)
        ownUnflushed = false
        context.writeAndFlush(wrapOutboundOut(frame)).assumeIsolated().whenComplete { _ in
            let shut = context.eventLoop.makePromise(of: Void.self)
            shut.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
            context.close(mode: .output, promise: shut)
        }
        closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(5)) {
            context.close(promise: nil)
        }
        // Reads go on (and are dropped), to see the client's end.
        resumeReading()
    }

    // MARK: Writing to this peer

    /// Writes a frame to this connection, flushed at the end of the read
    /// burst when one is being read, else at once.
    private func writeOwn(_ frame: ByteBuffer) {
        guard let context else { return }
        if reading {
            context.write(wrapOutboundOut(frame), promise: nil)
            ownUnflushed = true
        } else {
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        }
    }

    /// The channel's allocator, which the relay leaves at NIO's default: read
    /// once rather than through the channel per buffer.
    private static let allocator = ByteBufferAllocator()

    private static let waiting = event(#"{"type":"waiting"}"#)
    private static let peerJoined = event(#"{"type":"peer-joined"}"#)
    private static let peerLeftEvent = event(#"{"type":"peer-left"}"#)
    private static let refusedNoPeer = event(#"{"type":"refused","reason":"no-peer"}"#)

    private static func event(_ json: String) -> ByteBuffer {
        frame(opcode: 0x1, payload: json.utf8)
    }

    /// An unmasked frame (the relay never masks: RFC 6455 5.1).
    static func frame<Bytes: Collection<UInt8>>(opcode: UInt8, payload: Bytes) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(10 + payload.count)
        writeHeader(&buffer, opcode: opcode, length: payload.count)
        buffer.writeBytes(payload)
        return buffer
    }

    @inline(__always)
    static func writeHeader(_ buffer: inout ByteBuffer, opcode: UInt8, length: Int) {
        buffer.writeInteger(0x80 | opcode)
        if length < 126 {
            buffer.writeInteger(UInt8(length))
        } else if length <= 0xFFFF {
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        } else {
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
        }
    }

    /// Appends `length` bytes of `input`, from `offset` past its reader
    /// index, to `out`, unmasked with `key` (the 4 key bytes as they lie in
    /// memory), 8 bytes at a time.
    @inline(__always)
    static func appendUnmasked(_ out: inout ByteBuffer, _ input: ByteBuffer, offset: Int, length: Int, key: UInt32) {
        guard length > 0 else { return }
        out.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { target in
            input.withUnsafeReadableBytes { source in
                guard let from = source.baseAddress, let to = target.baseAddress, source.count >= offset + length else { return 0 }
                let wide = UInt64(key) | UInt64(key) << 32
                var i = 0
                while i + 8 <= length {
                    let word = from.loadUnaligned(fromByteOffset: offset + i, as: UInt64.self)
                    to.storeBytes(of: word ^ wide, toByteOffset: i, as: UInt64.self)
                    i += 8
                }
                withUnsafeBytes(of: key) { keyBytes in
                    while i < length {
                        to.storeBytes(of: source[offset + i] ^ keyBytes[i & 3], toByteOffset: i, as: UInt8.self)
                        i += 1
                    }
                }
                return length
            }
        }
    }
}
