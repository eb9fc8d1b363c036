import Foundation
import ItsMeRelayProtocol
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1

/// The opening handshake's rules (RFC 6455 4.2.1), checked on every request
/// that asks for `Upgrade: websocket`, right after HTTP decoding and before
/// the upgrade machinery (which would close the connection without an answer
/// on a missing key or another version, and not check the key's form).
///
/// A request that breaks a rule goes on as a plain request, without its
/// `Upgrade` header, with `Connection: close` and with the refusal in
/// `marker`, and the responder answers it (docs/PROTOCOL.md 15.3): 400, or
/// 426 with `Sec-WebSocket-Version: 13`. A `marker` header a client sent is
/// dropped from every request.
final class HandshakeCheck: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    static let marker = "ItsMe-Relay-Refused-Handshake"

    enum Refusal: String {
        case method, httpVersion = "http-version", connection, key, version

        var error: RelayError {
            switch self {
            case .method: return Self.badRequest("a WebSocket handshake is a GET request")
            case .httpVersion: return Self.badRequest("a WebSocket handshake needs HTTP/1.1")
            case .connection: return Self.badRequest("a WebSocket handshake needs Connection: Upgrade")
            case .key: return Self.badRequest("a WebSocket handshake needs one Sec-WebSocket-Key of 16 bytes in base64")
            case .version:
                return RelayError(.badRequest, status: .upgradeRequired, message: "this relay speaks WebSocket version 13",
                    headers: [.secWebSocketVersion: "13", .connection: "close"])
            }
        }

        private static func badRequest(_ message: String) -> RelayError {
            RelayError(.badRequest, message: message, headers: [.connection: "close"])
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        head.headers.remove(name: Self.marker)
        guard Self.tokens(head.headers, "upgrade").contains("websocket") else {
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        }
        if let refusal = Self.refusal(head) {
            head.headers.remove(name: "upgrade")
            head.headers.replaceOrAdd(name: "connection", value: "close")
            head.headers.add(name: Self.marker, value: refusal.rawValue)
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        }
        context.fireChannelRead(wrapInboundOut(.head(head)))
        // The upgrade takes the connection over, or refuses it and closes
        // it: what follows is WebSocket bytes, not HTTP parts, so the check
        // leaves the pipeline.
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// The first rule `head` breaks, if any.
    static func refusal(_ head: HTTPRequestHead) -> Refusal? {
        guard head.method == .GET else { return .method }
        guard head.version.major == 1, head.version.minor >= 1 else { return .httpVersion }
        guard tokens(head.headers, "connection").contains("upgrade") else { return .connection }
        let keys = head.headers["sec-websocket-key"]
        guard keys.count == 1, let key = Data(base64Encoded: keys[0].trimmingCharacters(in: .whitespaces)), key.count == 16 else {
            return .key
        }
        let versions = head.headers["sec-websocket-version"]
        guard versions.count == 1, versions[0].trimmingCharacters(in: .whitespaces) == "13" else { return .version }
        return nil
    }

    /// The comma-separated tokens of every `name` header, lower-cased.
    private static func tokens(_ headers: HTTPHeaders, _ name: String) -> Set<String> {
        Set(headers[name].flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
    }
}

extension HTTPField.Name {
    static let refusedHandshake = HTTPField.Name(HandshakeCheck.marker)!
}
