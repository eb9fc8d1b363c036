// A WebSocket client connection in one channel handler: the HTTP/1.1
// upgrade, then RFC 6455 frames parsed straight from the read buffers and
// written masked (a client must mask) into one outbound buffer per
// connection that the owning worker flushes once per read burst or timer
// tick. No per-frame allocation, no pipeline hops. The wire format (the
// upgrade and its check, frame headers, masking) is WebSocketWire's, which
// the relay client's RoomSocket uses too; what stays here is what a load
// generator needs and a client does not: frames go to the worker's counters
// as slices of the read buffer, writes are batched across connections, and
// the timing frame is written in one pass (queueBinary).
import NIOCore
import WebSocketWire

enum Transport: Sendable {
    /// itsme-relay: binary frames forwarded to the one peer.
    case relay
    /// Magic Wormhole's mailbox server: JSON text, hex bodies, echo to all.
    case wormhole
}

final class WSConn: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum State { case connecting, handshaking, open, closed }

    // Everything below is touched only on the owning worker's event loop.
    unowned let worker: Worker
    let room: LoadRoom
    let side: Int
    let path: String
    let host: String
    private let key = WebSocketWire.newKey()
    private(set) var state = State.connecting
    private var context: ChannelHandlerContext?
    private var inbound: ByteBuffer?
    private var out: ByteBuffer
    var dirty = false
    var closing = false
    // A message split over continuation frames (not expected, handled anyway).
    private var fragment: ByteBuffer?
    private var fragmentOpcode: UInt8 = 0

    init(worker: Worker, room: LoadRoom, side: Int, path: String, host: String) {
        self.worker = worker
        self.room = room
        self.side = side
        self.path = path
        self.host = host
        out = ByteBufferAllocator().buffer(capacity: 1024)
    }

    var peer: WSConn { side == 0 ? room.b : room.a }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        state = .handshaking
        let request = WebSocketWire.upgradeRequest(host: host, path: path, key: key)
        var buffer = context.channel.allocator.buffer(capacity: request.utf8.count)
        buffer.writeString(request)
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let was = state
        state = .closed
        self.context = nil
        worker.connectionEnded(self, wasOpen: was == .open)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if !closing { worker.connectionFailed(self, "\(error)") }
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var cumulation = inbound {
            inbound = nil
            cumulation.writeBuffer(&buffer)
            process(&cumulation)
            if cumulation.readableBytes > 0 && state != .closed {
                cumulation.discardReadBytes()
                inbound = cumulation
            }
        } else {
            process(&buffer)
            if buffer.readableBytes > 0 && state != .closed { inbound = buffer }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        worker.flushDirty()
    }

    private func process(_ buffer: inout ByteBuffer) {
        if state == .handshaking {
            guard let length = WebSocketWire.headLength(buffer.readableBytesView) else {
                if buffer.readableBytes > WebSocketWire.maxHead { fail("oversized upgrade response") }
                return
            }
            let head = buffer.readString(length: length - 4) ?? ""
            buffer.moveReaderIndex(forwardBy: 4)
            if let problem = WebSocketWire.checkUpgrade(head: head, key: key) {
                let statusLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? head
                fail("upgrade refused (\(problem)): \(statusLine)")
                return
            }
            state = .open
            worker.connectionOpened(self)
        }
        if state == .open { parseFrames(&buffer) }
    }

    private func parseFrames(_ buffer: inout ByteBuffer) {
        while state == .open {
            guard let header = WebSocketWire.frameHeader(buffer) else { return }
            guard header.length <= UInt64(Int.max - header.size) else { fail("a frame of \(header.length) bytes"); return }
            let length = Int(header.length)
            guard buffer.readableBytes >= header.size + length else { return }
            var payload = buffer.getSlice(at: buffer.readerIndex + header.size, length: length)!
            buffer.moveReaderIndex(forwardBy: header.size + length)
            if let mask = header.mask {
                let key = mask.bigEndian
                withUnsafeBytes(of: key) { k in
                    payload.withUnsafeMutableReadableBytes { bytes in
                        for i in 0..<bytes.count { bytes[i] ^= k[i & 3] }
                    }
                }
            }
            let fin = header.fin
            let opcode = header.opcode
            switch opcode {
            case 0x0:  // continuation
                guard var partial = fragment else { fail("continuation without a start"); return }
                partial.writeBuffer(&payload)
                if fin {
                    fragment = nil
                    deliver(fragmentOpcode, &partial)
                } else {
                    fragment = partial
                }
            case 0x1, 0x2:
                if fin {
                    deliver(opcode, &payload)
                } else {
                    fragmentOpcode = opcode
                    fragment = payload
                }
            case 0x8:
                let code = payload.readableBytes >= 2 ? Int(payload.getInteger(at: payload.readerIndex, as: UInt16.self)!) : nil
                state = .closed
                worker.closeReceived(self, code: code)
                context?.close(promise: nil)
                return
            case 0x9:
                queueFrame(opcode: 0xA, payload: payload.readableBytesView)
                markDirty()
            case 0xA:
                break
            default:
                fail("unknown opcode \(opcode)")
                return
            }
        }
    }

    @inline(__always)
    private func deliver(_ opcode: UInt8, _ payload: inout ByteBuffer) {
        if opcode == 0x2 {
            worker.binaryReceived(self, payload)
        } else {
            worker.textReceived(self, payload)
        }
    }

    private func fail(_ why: String) {
        state = .closed
        worker.connectionFailed(self, why)
        context?.close(promise: nil)
    }

    // MARK: - sending

    @inline(__always)
    func markDirty() {
        if !dirty {
            dirty = true
            worker.dirty.append(self)
        }
    }

    /// A 64-byte binary frame: the intended and the actual send time
    /// (little-endian monotonic nanoseconds), then filler; masked.
    @inline(__always)
    func queueBinary(intended: UInt64, actual: UInt64, mask: UInt32) {
        out.writeWithUnsafeMutableBytes(minimumWritableBytes: 70) { raw in
            let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            p[0] = 0x82
            p[1] = 0x80 | 64
            let m0 = UInt8(truncatingIfNeeded: mask >> 24), m1 = UInt8(truncatingIfNeeded: mask >> 16)
            let m2 = UInt8(truncatingIfNeeded: mask >> 8), m3 = UInt8(truncatingIfNeeded: mask)
            p[2] = m0; p[3] = m1; p[4] = m2; p[5] = m3
            let q = p + 6
            for i in 0..<8 {
                q[i] = UInt8(truncatingIfNeeded: intended >> UInt64(8 * i))
                q[8 + i] = UInt8(truncatingIfNeeded: actual >> UInt64(8 * i))
            }
            for i in 16..<64 { q[i] = 0x5a }
            var i = 0
            while i < 64 {
                q[i] ^= m0; q[i + 1] ^= m1; q[i + 2] ^= m2; q[i + 3] ^= m3
                i += 4
            }
            return 70
        }
        markDirty()
    }

    /// Any frame, masked with a fresh key.
    func queueFrame<Bytes: Collection>(opcode: UInt8, payload: Bytes) where Bytes.Element == UInt8 {
        WebSocketWire.writeFrame(opcode: opcode, payload: payload, mask: UInt32(truncatingIfNeeded: worker.random.next()), into: &out)
    }

    func queueText(_ text: String) {
        queueFrame(opcode: 0x1, payload: text.utf8)
        markDirty()
    }

    /// Writes what was queued (called by the worker's flush).
    func flush() {
        dirty = false
        guard out.readableBytes > 0, let context, state != .closed else {
            out.clear()
            return
        }
        // Usually written at once, so `out` is unique again and clear()
        // keeps its storage; otherwise clear() gives it fresh storage.
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
        out.clear()
    }

    /// Close frame 1000, then the connection.
    func close() {
        closing = true
        guard let context, state == .open || state == .handshaking else {
            context?.close(promise: nil)
            return
        }
        if state == .open {
            queueFrame(opcode: 0x8, payload: [0x03, 0xe8])
            context.writeAndFlush(wrapOutboundOut(out), promise: nil)
            out.clear()
        }
        state = .closed
        context.close(promise: nil)
    }
}
