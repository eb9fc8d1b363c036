import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Puts a `FrameGuard` right after the WebSocket frame decoder when a
/// connection is upgraded: the upgrade is announced after the decoder is in
/// place and before any byte that followed the handshake is decoded, so the
/// guard sees every frame.
final class UpgradeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private let metrics: RelayMetrics

    init(metrics: RelayMetrics) { self.metrics = metrics }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .upgradeComplete = event as? HTTPServerUpgradeEvents {
            do {
                let pipeline = context.pipeline.syncOperations
                let decoder = try pipeline.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self)
                try pipeline.addHandler(FrameGuard(metrics: metrics), position: .after(decoder))
            } catch {
                // No guard, no room: a connection that cannot be checked
                // is not served.
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// The rules of RFC 6455 sections 5.1 to 5.5 and 7.4 on every frame a peer
/// sends, before the WebSocket layer sees it (docs/PROTOCOL.md 15.3,
/// Framing): a frame that is not masked, sets a reserved bit (the relay
/// negotiates no extension), has a reserved opcode, is a control frame that
/// is fragmented or longer than 125 bytes, continues no message or starts a
/// message inside another, or is a close with a 1-byte payload or a code
/// outside 1000-1003, 1007-1011 and 3000-4999, fails the connection with
/// 1002; a close whose reason is not UTF-8 fails it with 1007. Failing it:
/// a close frame with the code (unless one was sent already), then the
/// connection is closed; neither that frame nor any after it goes further.
final class FrameGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let metrics: RelayMetrics
    /// A data message was started and not finished.
    private var inMessage = false
    private var failed = false
    private var closeSent = false

    init(metrics: RelayMetrics) { self.metrics = metrics }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        if let code = check(unwrapInboundIn(data)) {
            fail(context, code)
        } else {
            context.fireChannelRead(data)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if unwrapOutboundIn(data).opcode == .connectionClose { closeSent = true }
        context.write(data, promise: promise)
    }

    /// The code `frame` fails the connection with, or nil if it keeps the rules.
    private func check(_ frame: WebSocketFrame) -> WebSocketErrorCode? {
        guard frame.maskKey != nil, !frame.rsv1, !frame.rsv2, !frame.rsv3 else { return .protocolError }
        if frame.opcode.isControlOpcode, !frame.fin || frame.length > 125 { return .protocolError }
        switch frame.opcode {
        case .continuation:
            guard inMessage else { return .protocolError }
            inMessage = !frame.fin
        case .binary, .text:
            guard !inMessage else { return .protocolError }
            inMessage = !frame.fin
        case .connectionClose:
            return Self.check(close: frame.unmaskedData)
        case .ping, .pong:
            break
        default:
            return .protocolError
        }
        return nil
    }

    /// A close's payload: empty, or a valid code (RFC 6455 7.4) and a UTF-8 reason.
    static func check(close payload: ByteBuffer) -> WebSocketErrorCode? {
        var payload = payload
        if payload.readableBytes == 0 { return nil }
        guard let code = payload.readInteger(as: UInt16.self) else { return .protocolError }
        switch code {
        case 1000...1003, 1007...1011, 3000...4999: break
        default: return .protocolError
        }
        guard String(validating: payload.readableBytesView, as: UTF8.self) != nil else { return .dataInconsistentWithMessage }
        return nil
    }

    private func fail(_ context: ChannelHandlerContext, _ code: WebSocketErrorCode) {
        failed = true
        metrics.reject("protocol-error")
        guard !closeSent else {
            context.close(promise: nil)
            return
        }
        closeSent = true
        var data = context.channel.allocator.buffer(capacity: 2)
        data.write(webSocketErrorCode: code)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))).whenComplete { _ in
            loopBound.value.close(promise: nil)
        }
    }
}
