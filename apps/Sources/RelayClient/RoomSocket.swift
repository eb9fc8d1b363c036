import Foundation
import ItsMeKit
import NIOCore
import WebSocketWire
import ItsMeRelayProtocol

/// The WebSocket of a room (RFC 6455) in one channel handler, behind TLS
/// for a wss:// relay: the HTTP/1.1 upgrade written and read by hand, then
/// frames parsed from the read buffers, masked on the way out (the wire
/// format is WebSocketWire's, which the load generator uses too). What arrives
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
    private let key: String
    private let maxMessage: Int

    init(inbox: RoomInbox, host: String, path: String, maxMessage: Int) {
        self.inbox = inbox
        self.maxMessage = maxMessage
        key = WebSocketWire.newKey()
        request = WebSocketWire.upgradeRequest(host: host, path: path, key: key, userAgent: "itsme-relay-client")
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
        guard let length = WebSocketWire.headLength(view) else {
            if view.count > WebSocketWire.maxHead { fail(context, .badResponse("the relay's answer to the room request is too long")) }
            return
        }
        let head = String(decoding: view.prefix(length - 4), as: UTF8.self)
        received?.moveReaderIndex(forwardBy: length)
        switch WebSocketWire.checkUpgrade(head: head, key: key) {
        case nil:
            state = .open
            inbox.push(.opened)
        case .notHTTP:
            fail(context, .badResponse("the relay's answer to the room request is not HTTP"))
        case .refused(let code, let retryAfter):
            let kind = code == RelayErrorKind.busy.status ? RelayErrorKind.busy.rawValue : code == RelayErrorKind.rateLimited.status ? RelayErrorKind.rateLimited.rawValue : "connection"
            fail(
                context,
                RelayError("the relay did not open the room (it answered \(code))", status: code, kind: kind, retryAfter: retryAfter))
        case .malformed:
            fail(context, .badResponse("the relay's WebSocket upgrade is malformed"))
        case .unrequestedExtension:
            fail(context, .badResponse("the relay turned on a WebSocket extension no one asked for"))
        }
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
        guard let header = WebSocketWire.frameHeader(buffer) else { return .incomplete }
        guard header.reserved == 0 else { return .invalid("reserved bits set") }
        guard header.mask == nil else { return .invalid("a masked frame from the server") }
        if header.opcode >= 8 {
            guard header.fin, header.length <= 125 else { return .invalid("a fragmented or long control frame") }
        }
        guard header.length <= UInt64(maxPayload) else { return .invalid("a frame larger than \(maxPayload) bytes") }
        guard buffer.readableBytes >= header.size + Int(header.length) else { return .incomplete }
        buffer.moveReaderIndex(forwardBy: header.size)
        let payload = buffer.readBytes(length: Int(header.length)) ?? []
        return .frame(fin: header.fin, opcode: header.opcode, payload: payload)
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
        WebSocketWire.writeFrame(opcode: opcode, payload: payload, mask: WebSocketWire.randomMask(), into: &buffer)
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
        startClose(code: UInt16(RoomCloseCode.protocolError))
        state = .closed
        context.close(promise: nil)
    }

    private func fail(_ context: ChannelHandlerContext, _ error: RelayError) {
        inbox.finish(.failed(error))
        state = .closed
        context.close(promise: nil)
    }
}
