import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Leaves the pipeline when a connection is upgraded: a room connection
/// applies the frame rules itself (`FrameRules`, in RoomConnection), as it
/// decodes each frame, so nothing stands between the bytes and the room.
/// It stays on every connection that is not upgraded, where it does nothing.
final class UpgradeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private let metrics: RelayMetrics

    init(metrics: RelayMetrics) { self.metrics = metrics }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .upgradeComplete = event as? HTTPServerUpgradeEvents {
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// The rules of RFC 6455 sections 5.1 to 5.5 and 7.4 on every frame a peer
/// sends (docs/PROTOCOL.md 15.3, Framing): a frame that is not masked, sets
/// a reserved bit (the relay negotiates no extension), has a reserved
/// opcode, is a control frame that is fragmented or longer than 125 bytes,
/// continues no message or starts a message inside another, or is a close
/// with a 1-byte payload or a code outside 1000-1003, 1007-1011 and
/// 3000-4999, fails the connection with 1002; a close whose reason is not
/// UTF-8 fails it with 1007. Failing it: a close frame with the code (unless
/// one was sent already), then the connection is closed; neither that frame
/// nor any after it goes further.
enum FrameRules {
    /// The code a frame with this header fails the connection with, or nil
    /// if the header keeps the rules. `inMessage`: a data message was
    /// started and not finished. A pure function of its arguments, so that
    /// a header may be checked again when its payload has not all arrived.
    static func violation(fin: Bool, reserved: UInt8, opcode: UInt8, masked: Bool, length: UInt64, inMessage: Bool)
        -> WebSocketErrorCode?
    {
        guard masked, reserved == 0 else { return .protocolError }
        // RFC 6455 5.2: the most significant bit of a 64-bit length is 0.
        guard length <= UInt64(Int64.max) else { return .protocolError }
        let control = opcode & 0x8 != 0
        if control, !fin || length > 125 { return .protocolError }
        switch opcode {
        case 0x0:
            return inMessage ? nil : .protocolError
        case 0x1, 0x2:
            return inMessage ? .protocolError : nil
        case 0x8, 0x9, 0xA:
            return nil
        default:
            return .protocolError
        }
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
}
