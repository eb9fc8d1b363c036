import NIOCore
import NIOWebSocket
import Synchronization
import ItsMeRelayProtocol

/// Why the relay closes a room connection: the close frame it sends.
enum RoomClose {
    /// Neither a binary message nor a ping for `--room-idle` seconds.
    case idle
    /// The relay is shutting down.
    case goingAway
    /// The relay's previous ping was not answered.
    case noPong
    /// A third peer, or a group room's peer beyond `--max-group` or
    /// `--max-group-joins`.
    case full
    /// The other peer of a two-party room left (after `peer-left`).
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
        case .idle: return UInt16(RoomCloseCode.idle)
        case .goingAway, .noPong: return UInt16(RoomCloseCode.goingAway)
        case .full: return UInt16(RoomCloseCode.roomFull)
        case .peerLeft, .answer: return UInt16(RoomCloseCode.normal)
        case .textMessage: return UInt16(RoomCloseCode.unsupportedData)
        case .tooLarge: return UInt16(RoomCloseCode.tooLarge)
        case .failed(let code):
            var buffer = ByteBuffer()
            buffer.write(webSocketErrorCode: code)
            return buffer.readInteger(as: UInt16.self) ?? UInt16(RoomCloseCode.protocolError)
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

/// One peer's WebSocket connection in a room, two-party or group, from the
/// upgrade on (docs/PROTOCOL.md 15.3, 15.9): the whole of the room's fast
/// path.
///
/// It decodes the peer's frames straight from the read buffers, applies
/// `FrameRules`, and writes each binary message, unmasked and framed for
/// the other peers (in a group room behind the sender's slot), into one
/// buffer per read burst, which it hands to every other peer's channel
/// once the burst is read (channelReadComplete): one hop to each other
/// channel's event loop and one flush per burst and peer, no task, no lock,
/// and no allocation per message beyond that buffer, which the peers share.
/// A fragmented message is gathered and forwarded whole. Pings are answered
/// here and count as activity; the relay's own pings (`keepAlive`) expect a
/// pong.
///
/// Back-pressure: while any other peer's channel is not writable (its
/// socket buffer and NIO's high-water mark are full), this connection stops
/// asking for reads, so a fast sender cannot fill the relay's memory; it
/// resumes when every other side has drained.
///
/// Order: messages go out in the order they were read, and when this peer
/// leaves (a close, the end of the stream, a broken rule) everything read
/// before is handed over first, then the other peers are told `peer-left`,
/// through the same queue of their event loops, so after them. Each peer's
/// view of the room (`peers`) changes on its own loop, through that queue
/// too, so a peer's events and the messages it is sent reach it in one
/// order.
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
    /// Calls from elsewhere (the other peers, the hub) go through `run`.
    let loop: any EventLoop
    /// The slice of the relay's pings this connection is in, and when it
    /// opened (uptime nanoseconds): its first ping comes an interval or
    /// more later (RoomHub.ping).
    let slice: Int
    let opened = NIODeadline.now().uptimeNanoseconds
    private let kind: RoomKind
    private let roomID: String
    private let hub: RoomHub
    /// A binary message passed or a ping came since the hub's last sweep.
    private let activity = Atomic<Bool>(false)

    private var context: ChannelHandlerContext?
    private var phase = Phase.open
    private var room: ServerRoom?
    /// This connection's slot in its room (a group room's is in every
    /// message it sends), and the other peers its messages go to.
    private var slot = 0
    private var peers: [RoomConnection] = []
    /// The other peers whose channels are not writable: while there is
    /// one, reads wait.
    private var unwritable: Set<ObjectIdentifier> = []
    /// Bytes of a frame not yet read whole.
    private var partial: ByteBuffer?
    /// The fragments of a binary message so far, unmasked.
    private var message: ByteBuffer?
    private var inMessage = false
    /// Frames for the other peers, read in this burst.
    private var burst: ByteBuffer?
    private var burstMessages = 0
    private var activeInBurst = false
    private var reading = false
    private var ownUnflushed = false
    private var readHeld = false
    private var awaitingPong = false
    private var closeTimer: Scheduled<Void>?

    init(kind: RoomKind, roomID: String, hub: RoomHub, loop: any EventLoop) {
        self.kind = kind
        self.roomID = roomID
        self.hub = hub
        self.loop = loop
        slice = hub.nextSlice()
    }

    /// Bytes in front of each forwarded message: a group room's 2-byte slot.
    private var prefixLength: Int { kind == .group ? 2 : 0 }

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
        let (room, joined) = hub.join(kind, roomID, self)
        self.room = room
        switch joined {
        case .joined(let slot, let present):
            self.slot = slot
            peers = present.map(\.connection)
            switch kind {
            case .pair: writeOwn(present.isEmpty ? Self.waiting : Self.peerJoined)
            case .group: writeOwn(Self.event(.joined(slot: slot, peers: present.map(\.slot))))
            }
            for other in peers { other.run { other.peerJoined(self, slot: slot) } }
        case .full:
            hub.metrics.reject(.roomFull)
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
        peers = []
        unwritable = []
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
        peers = []
        unwritable = []
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The end of the peer's stream: whatever it sent whole is
            // forwarded, then it leaves the room.
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

    /// While another peer cannot take more, reads wait (back-pressure).
    func read(context: ChannelHandlerContext) {
        if phase == .open, !unwritable.isEmpty {
            readHeld = true
            return
        }
        context.read()
    }

    /// Every other peer is told: its reads wait while this one cannot take more.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        for peer in peers { peer.run { peer.peerWritabilityChanged(self, writable) } }
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
                hub.metrics.reject(.protocolError)
                closeOnLoop(.failed(code))
                return 0
            }
            if opcode == 0x1 {
                hub.metrics.reject(.badRequest)
                closeOnLoop(.textMessage)
                return 0
            }
            // The payload gathered so far, without a group room's slot.
            let gathered = max(0, (message?.readableBytes ?? 0) - prefixLength)
            if opcode <= 0x2, length > UInt64(max(0, hub.maxFrame - gathered)) {
                hub.metrics.reject(.tooLarge)
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
                if peers.isEmpty {
                    refuseAlone()
                } else {
                    var out = burst ?? Self.allocator.buffer(capacity: max(available, total) + prefixLength)
                    burst = nil
                    Self.writeHeader(&out, opcode: 0x2, length: prefixLength + payloadLength)
                    if kind == .group { out.writeInteger(UInt16(truncatingIfNeeded: slot)) }
                    Self.appendUnmasked(&out, input, offset: payload, length: payloadLength, key: key)
                    burst = out
                    burstMessages += 1
                    activeInBurst = true
                }
            case 0x2, 0x0:
                var gathered = message ?? Self.allocator.buffer(capacity: prefixLength + payloadLength)
                message = nil
                if opcode == 0x2, kind == .group { gathered.writeInteger(UInt16(truncatingIfNeeded: slot)) }
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
                    hub.metrics.reject(.protocolError)
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

    /// A whole gathered message (in a group room, behind the slot), for
    /// the other peers.
    private func forward(_ gathered: ByteBuffer) {
        guard !peers.isEmpty, context != nil else {
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
        hub.metrics.reject(.noPeer)
        writeOwn(Self.refusedNoPeer)
    }

    // MARK: Handing over to the other peers

    /// Hands this burst's messages to every other peer (one buffer, which
    /// they share), and marks activity.
    private func handOver() {
        if activeInBurst {
            activeInBurst = false
            activity.store(true, ordering: .relaxed)
        }
        guard let out = burst else { return }
        let count = burstMessages
        burst = nil
        burstMessages = 0
        for peer in peers {
            // The peers of a room usually share this loop: then the
            // hand-over is a call, with no closure to allocate.
            if peer.loop === loop {
                peer.deliver(out, count: count)
            } else {
                peer.loop.execute { peer.deliver(out, count: count) }
            }
        }
    }

    /// Another peer's messages: written and flushed at once.
    private func deliver(_ frames: ByteBuffer, count: Int) {
        guard phase == .open, let context else { return }
        context.writeAndFlush(wrapOutboundOut(frames), promise: nil)
        hub.metrics.framesForwarded.increment(by: Int64(count))
    }

    /// `other` joined with `slot`: its messages and this one's go between
    /// them from now on. If this channel cannot take more at the moment,
    /// `other` learns it at once (it hears of changes from now on).
    private func peerJoined(_ other: RoomConnection, slot: Int) {
        guard phase == .open, let context else { return }
        peers.append(other)
        switch kind {
        case .pair: writeOwn(Self.peerJoined)
        case .group: writeOwn(Self.event(.peerJoined(slot: slot)))
        }
        if !context.channel.isWritable { other.run { other.peerWritabilityChanged(self, false) } }
    }

    private func peerWritabilityChanged(_ other: RoomConnection, _ writable: Bool) {
        guard phase == .open, peers.contains(where: { $0 === other }) else { return }
        if writable {
            unwritable.remove(ObjectIdentifier(other))
            resumeReading()
        } else {
            unwritable.insert(ObjectIdentifier(other))
        }
    }

    private func resumeReading() {
        guard readHeld, unwritable.isEmpty || phase != .open, let context else { return }
        readHeld = false
        context.read()
    }

    // MARK: Leaving and closing

    private func leaveRoom() {
        guard let room else { return }
        self.room = nil
        let slot = slot
        for other in hub.leave(room, self) {
            other.run { other.peerLeft(self, slot: slot) }
        }
    }

    /// `other`, of `slot`, left: in a two-party room the room has ended and
    /// this connection is closed; in a group room it goes on with the rest.
    private func peerLeft(_ other: RoomConnection, slot: Int) {
        guard phase == .open else { return }
        switch kind {
        case .pair:
            writeOwn(Self.peerLeftEvent)
            closeOnLoop(.peerLeft)
        case .group:
            peers.removeAll { $0 === other }
            unwritable.remove(ObjectIdentifier(other))
            writeOwn(Self.event(.peerLeft(slot: slot)))
            resumeReading()
        }
    }

    private func closeOnLoop(_ why: RoomClose) {
        guard phase == .open, let context else { return }
        handOver()
        phase = .closing
        partial = nil
        message = nil
        leaveRoom()
        peers = []
        unwritable = []
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

    private static let waiting = event(.waiting)
    private static let peerJoined = event(.peerJoined(slot: nil))
    private static let peerLeftEvent = event(.peerLeft(slot: nil))
    private static let refusedNoPeer = event(.refused(reason: RoomEvent.noPeer))

    /// An event in a text frame (docs/PROTOCOL.md 15.3, 15.9).
    private static func event(_ event: RoomEvent) -> ByteBuffer {
        frame(opcode: 0x1, payload: event.json.utf8)
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
