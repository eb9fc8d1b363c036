// A WebSocket client connection in one channel handler: the HTTP/1.1
// upgrade written and parsed by hand, then RFC 6455 frames parsed straight
// from the read buffers and written masked (a client must mask) into one
// outbound buffer per connection that the owning worker flushes once per
// read burst or timer tick. No per-frame allocation, no pipeline hops.
import NIOCore

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
        let key = base64(systemRandom(16))
        let request = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
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
            guard let end = headerEnd(buffer) else {
                if buffer.readableBytes > 16_384 { fail("oversized upgrade response") }
                return
            }
            let head = buffer.readString(length: end) ?? ""
            // "HTTP/1.1 101 Switching Protocols"
            let statusLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? head
            let parts = statusLine.split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, parts[1] == "101" else {
                fail("upgrade refused: \(statusLine)")
                return
            }
            state = .open
            worker.connectionOpened(self)
        }
        if state == .open { parseFrames(&buffer) }
    }

    /// Length of the response head including the blank line, if complete.
    private func headerEnd(_ buffer: ByteBuffer) -> Int? {
        buffer.withUnsafeReadableBytes { bytes -> Int? in
            guard bytes.count >= 4 else { return nil }
            for i in 3..<bytes.count where bytes[i] == 10 && bytes[i - 1] == 13 && bytes[i - 2] == 10 && bytes[i - 3] == 13 {
                return i + 1
            }
            return nil
        }
    }

    private func parseFrames(_ buffer: inout ByteBuffer) {
        while state == .open {
            let available = buffer.readableBytes
            guard available >= 2 else { return }
            let start = buffer.readerIndex
            let b0: UInt8 = buffer.getInteger(at: start)!
            let b1: UInt8 = buffer.getInteger(at: start + 1)!
            var length = Int(b1 & 0x7f)
            var headerLength = 2
            if length == 126 {
                guard available >= 4 else { return }
                length = Int(buffer.getInteger(at: start + 2, as: UInt16.self)!)
                headerLength = 4
            } else if length == 127 {
                guard available >= 10 else { return }
                length = Int(truncatingIfNeeded: buffer.getInteger(at: start + 2, as: UInt64.self)!)
                headerLength = 10
            }
            let masked = b1 & 0x80 != 0
            var key: [UInt8] = []
            if masked {
                guard available >= headerLength + 4 else { return }
                key = buffer.getBytes(at: start + headerLength, length: 4)!
                headerLength += 4
            }
            guard length >= 0, available >= headerLength + length else { return }
            var payload = buffer.getSlice(at: start + headerLength, length: length)!
            buffer.moveReaderIndex(forwardBy: headerLength + length)
            if masked {
                payload.withUnsafeMutableReadableBytes { bytes in
                    for i in 0..<bytes.count { bytes[i] ^= key[i & 3] }
                }
            }
            let fin = b0 & 0x80 != 0
            let opcode = b0 & 0x0f
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
        let count = payload.count
        out.writeInteger(0x80 | opcode)
        if count < 126 {
            out.writeInteger(UInt8(0x80 | count))
        } else if count <= 0xffff {
            out.writeInteger(UInt8(0x80 | 126))
            out.writeInteger(UInt16(count))
        } else {
            out.writeInteger(UInt8(0x80 | 127))
            out.writeInteger(UInt64(count))
        }
        let mask = UInt32(truncatingIfNeeded: worker.random.next())
        out.writeInteger(mask)
        var key = [UInt8(truncatingIfNeeded: mask >> 24), UInt8(truncatingIfNeeded: mask >> 16),
                   UInt8(truncatingIfNeeded: mask >> 8), UInt8(truncatingIfNeeded: mask)]
        var i = 0
        key.withUnsafeMutableBufferPointer { k in
            for byte in payload {
                out.writeInteger(byte ^ k[i & 3])
                i += 1
            }
        }
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

private let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

func base64(_ bytes: [UInt8]) -> String {
    var out = [UInt8]()
    var i = 0
    while i < bytes.count {
        let b0 = Int(bytes[i]), b1 = i + 1 < bytes.count ? Int(bytes[i + 1]) : 0, b2 = i + 2 < bytes.count ? Int(bytes[i + 2]) : 0
        out.append(base64Alphabet[b0 >> 2])
        out.append(base64Alphabet[((b0 & 3) << 4) | (b1 >> 4)])
        out.append(i + 1 < bytes.count ? base64Alphabet[((b1 & 15) << 2) | (b2 >> 6)] : UInt8(ascii: "="))
        out.append(i + 2 < bytes.count ? base64Alphabet[b2 & 63] : UInt8(ascii: "="))
        i += 3
    }
    return String(decoding: out, as: UTF8.self)
}
