import Foundation
import ItsMeCore
import NIOCore

/// The WebSocket of a room (RFC 6455) in one channel handler, behind TLS
/// for a wss:// relay: the HTTP/1.1 upgrade written and read by hand, then
/// frames parsed from the read buffers, masked on the way out. What arrives
/// goes to the room's inbox; the room writes its frames straight to the
/// channel.
///
/// One handler, rather than an upgrade that rebuilds the pipeline: the
/// relay answers a third peer with the upgrade, a close frame and the end
/// of its output all at once, and none of that may be lost between
/// handlers being swapped.
final class RoomSocket: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State { case handshaking, open, closed }

    // Touched only on the channel's event loop.
    private var state = State.handshaking
    private var received: ByteBuffer?
    private var fragments: [UInt8]?
    private var fragmentOpcode: UInt8 = 0
    private var sentClose = false
    private var context: ChannelHandlerContext?

    private let inbox: RoomInbox
    private let request: String
    private let expectedAccept: String
    private let maxMessage: Int

    /// The longest upgrade answer read.
    static let maxHead = 16_384

    init(inbox: RoomInbox, host: String, path: String, maxMessage: Int) {
        self.inbox = inbox
        self.maxMessage = maxMessage
        var random = SystemRandom()
        let key = Base64.encode(random.bytes(16), .standardPadded)
        expectedAccept = Base64.encode(SHA1.hash(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)), .standardPadded)
        request =
            "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUser-Agent: itsme-relay-client\r\nUpgrade: websocket\r\n"
            + "Connection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
    }

    // MARK: Events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { sendRequest(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendRequest(context)
        context.fireChannelActive()
    }

    private var requestSent = false

    private func sendRequest(_ context: ChannelHandlerContext) {
        guard !requestSent else { return }
        requestSent = true
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: request)), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if state == .handshaking {
            inbox.finish(.failed(RelayError.connection("the relay closed the connection before the room opened")))
        } else {
            // A close frame, if one came, has finished the inbox already.
            inbox.finish(.closed(code: nil))
        }
        state = .closed
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        inbox.finish(.failed(error))
        state = .closed
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        guard state != .closed else { return }
        if received == nil {
            received = buffer
        } else {
            received?.writeBuffer(&buffer)
        }
        if state == .handshaking { readHead(context) }
        if state == .open { readFrames(context) }
        if received?.readableBytes == 0 { received = nil } else { received?.discardReadBytes() }
    }

    // MARK: The upgrade

    private func readHead(_ context: ChannelHandlerContext) {
        guard let buffer = received else { return }
        let view = buffer.readableBytesView
        guard let end = Self.headEnd(view) else {
            if view.count > Self.maxHead { fail(context, .badResponse("the relay's answer to the room request is too long")) }
            return
        }
        let head = String(decoding: view[view.startIndex..<end], as: UTF8.self)
        received?.moveReaderIndex(forwardBy: end + 4 - view.startIndex)
        var lines = head.components(separatedBy: "\r\n")
        let status = lines.removeFirst().split(separator: " ", maxSplits: 2)
        guard status.count >= 2, status[0].hasPrefix("HTTP/1."), let code = Int(status[1]) else {
            return fail(context, .badResponse("the relay's answer to the room request is not HTTP"))
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        guard code == 101 else {
            var retryAfter: Int?
            if let text = headers["retry-after"], text.count <= 9, text.allSatisfy({ $0.isASCII && $0.isNumber }) {
                retryAfter = Int(text)
            }
            let kind = code == 503 ? "busy" : code == 429 ? "rate-limited" : "connection"
            return fail(
                context,
                RelayError("the relay did not open the room (it answered \(code))", status: code, kind: kind, retryAfter: retryAfter))
        }
        guard headers["upgrade"]?.lowercased() == "websocket",
            headers["connection"]?.lowercased().contains("upgrade") == true,
            headers["sec-websocket-accept"] == expectedAccept
        else { return fail(context, .badResponse("the relay's WebSocket upgrade is malformed")) }
        guard headers["sec-websocket-extensions"] == nil else {
            return fail(context, .badResponse("the relay turned on a WebSocket extension no one asked for"))
        }
        state = .open
        inbox.push(.opened)
    }

    /// The index of the `\r\n\r\n` that ends an HTTP head.
    private static func headEnd(_ bytes: ByteBufferView) -> Int? {
        var i = bytes.startIndex
        while i + 3 < bytes.endIndex {
            if bytes[i] == 13, bytes[i + 1] == 10, bytes[i + 2] == 13, bytes[i + 3] == 10 { return i }
            i += 1
        }
        return nil
    }

    // MARK: Frames in

    private func readFrames(_ context: ChannelHandlerContext) {
        while state == .open, var buffer = received {
            let frame = Self.parseFrame(&buffer, maxPayload: maxMessage)
            received = buffer
            switch frame {
            case .incomplete:
                return
            case .invalid(let why):
                return protocolError(context, why)
            case .frame(let fin, let opcode, let payload):
                handle(context, fin: fin, opcode: opcode, payload: payload)
            }
        }
    }

    private enum Parsed {
        case incomplete
        case invalid(String)
        case frame(fin: Bool, opcode: UInt8, payload: [UInt8])
    }

    /// One frame from the front of `buffer` (consumed), or `.incomplete`
    /// (nothing consumed) until more bytes arrive.
    private static func parseFrame(_ buffer: inout ByteBuffer, maxPayload: Int) -> Parsed {
        let view = buffer.readableBytesView
        guard view.count >= 2 else { return .incomplete }
        let b0 = view[view.startIndex], b1 = view[view.startIndex + 1]
        guard b0 & 0x70 == 0 else { return .invalid("reserved bits set") }
        guard b1 & 0x80 == 0 else { return .invalid("a masked frame from the server") }
        let fin = b0 & 0x80 != 0, opcode = b0 & 0x0F
        var length = UInt64(b1 & 0x7F)
        var header = 2
        if length == 126 {
            guard view.count >= 4 else { return .incomplete }
            length = UInt64(view[view.startIndex + 2]) << 8 | UInt64(view[view.startIndex + 3])
            header = 4
        } else if length == 127 {
            guard view.count >= 10 else { return .incomplete }
            length = (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(view[view.startIndex + 2 + $1]) }
            header = 10
        }
        if opcode >= 8 {
            guard fin, length <= 125 else { return .invalid("a fragmented or long control frame") }
        }
        guard length <= UInt64(maxPayload) else { return .invalid("a frame larger than \(maxPayload) bytes") }
        guard view.count >= header + Int(length) else { return .incomplete }
        buffer.moveReaderIndex(forwardBy: header)
        let payload = buffer.readBytes(length: Int(length)) ?? []
        return .frame(fin: fin, opcode: opcode, payload: payload)
    }

    private func handle(_ context: ChannelHandlerContext, fin: Bool, opcode: UInt8, payload: [UInt8]) {
        switch opcode {
        case 0x0:
            guard var collected = fragments else { return protocolError(context, "a continuation without a start") }
            guard collected.count + payload.count <= maxMessage else {
                return protocolError(context, "a message larger than \(maxMessage) bytes")
            }
            collected += payload
            if fin {
                fragments = nil
                deliver(context, opcode: fragmentOpcode, collected)
            } else {
                fragments = collected
            }
        case 0x1, 0x2:
            guard fragments == nil else { return protocolError(context, "a new message inside a fragmented one") }
            if fin {
                deliver(context, opcode: opcode, payload)
            } else {
                fragments = payload
                fragmentOpcode = opcode
            }
        case 0x8:
            let code = payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : nil
            inbox.finish(.closed(code: code))
            state = .closed
            // Answer the close, then end the connection.
            let reply = Self.frame(opcode: 0x8, payload: [0x03, 0xE8])
            if sentClose {
                context.close(promise: nil)
            } else {
                sentClose = true
                context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in context.close(promise: nil) }
            }
        case 0x9:
            context.writeAndFlush(wrapOutboundOut(Self.frame(opcode: 0xA, payload: payload)), promise: nil)
        case 0xA:
            break
        default:
            protocolError(context, "an unknown opcode")
        }
    }

    private func deliver(_ context: ChannelHandlerContext, opcode: UInt8, _ payload: [UInt8]) {
        let accepted: Bool
        if opcode == 0x1 {
            guard let text = String(bytes: payload, encoding: .utf8) else {
                return protocolError(context, "a text frame that is not UTF-8")
            }
            accepted = inbox.push(.text(text))
        } else {
            accepted = inbox.push(.binary(payload))
        }
        if !accepted { startClose(code: 1008) }
    }

    // MARK: Frames out

    /// A client frame: final, masked under a fresh key.
    static func frame(opcode: UInt8, payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(payload.count + 14)
        buffer.writeInteger(0x80 | opcode)
        if payload.count < 126 {
            buffer.writeInteger(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            buffer.writeInteger(UInt8(0x80 | 126))
            buffer.writeInteger(UInt16(payload.count))
        } else {
            buffer.writeInteger(UInt8(0x80 | 127))
            buffer.writeInteger(UInt64(payload.count))
        }
        var generator = SystemRandomNumberGenerator()
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255, using: &generator) }
        buffer.writeBytes(mask)
        buffer.writeBytes(payload.enumerated().map { $0.element ^ mask[$0.offset & 3] })
        return buffer
    }

    /// Sends a close frame (once) and lets the relay end the connection.
    /// Call on the event loop.
    func startClose(code: UInt16) {
        guard let context, state == .open, !sentClose else { return }
        sentClose = true
        context.writeAndFlush(wrapOutboundOut(Self.frame(opcode: 0x8, payload: [UInt8(code >> 8), UInt8(code & 0xFF)])), promise: nil)
    }

    private func protocolError(_ context: ChannelHandlerContext, _ why: String) {
        inbox.finish(.failed(RelayError.badResponse("the relay broke the WebSocket protocol (\(why))")))
        startClose(code: 1002)
        state = .closed
        context.close(promise: nil)
    }

    private func fail(_ context: ChannelHandlerContext, _ error: RelayError) {
        inbox.finish(.failed(error))
        state = .closed
        context.close(promise: nil)
    }
}

/// SHA-1, for the WebSocket handshake's accept key only (RFC 6455 4.2.2).
enum SHA1 {
    static func hash(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var data = message
        let bitLength = UInt64(message.count) * 8
        data.append(0x80)
        while data.count % 64 != 56 { data.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { data.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: data.count, by: 64) {
            for i in 0..<16 {
                let j = chunk + i * 4
                w[i] = UInt32(data[j]) << 24 | UInt32(data[j + 1]) << 16 | UInt32(data[j + 2]) << 8 | UInt32(data[j + 3])
            }
            for i in 16..<80 {
                let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
                w[i] = x << 1 | x >> 31
            }
            var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
            for i in 0..<80 {
                let (f, k): (UInt32, UInt32)
                switch i {
                case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let t = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
                (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, t)
            }
            h[0] &+= a
            h[1] &+= b
            h[2] &+= c
            h[3] &+= d
            h[4] &+= e
        }
        return h.flatMap { v in [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: v >> UInt32($0)) } }
    }
}
