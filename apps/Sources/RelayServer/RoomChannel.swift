import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import ItsMeRelayProtocol

/// What a connection became with its first request.
enum RelayConnectionKind: Sendable {
    /// Plain HTTP, for the responder.
    case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    /// A WebSocket upgrade refused before it was made: answered as the
    /// refusal says, then closed.
    case refusedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, UpgradeRefusal)
    /// A room connection, two-party or group, served by its RoomConnection
    /// handler.
    case room
}

/// Why a WebSocket upgrade to a room or group room path was not made.
enum UpgradeRefusal: Sendable {
    /// A path that is not a valid room or group room, or a handshake the
    /// upgrade could not take: 400, without a body.
    case badRequest
    /// A group-room join beyond the client's `--group-join-rate`
    /// (docs/PROTOCOL.md 15.9): `429 rate-limited` with `Retry-After`, as
    /// the HTTP routes answer it.
    case rateLimited(seconds: Int)

    /// The answer, whole.
    var answer: [HTTPResponsePart] {
        switch self {
        case .badRequest:
            return [.head(HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])), .end(nil)]
        case .rateLimited(let seconds):
            let (head, body) = RelayError.rateLimited(seconds).closingAnswer()
            return [.head(head), .body(body), .end(nil)]
        }
    }
}

/// The relay's connections: HTTP/1.1 for the responder (RelayResponder),
/// and the WebSocket upgrade of a room or group room path straight into a
/// RoomConnection,
/// set up synchronously in the pipeline, in place of an async channel: a
/// room's frames never leave the event loops.
struct RelayChannel: ServerChildChannel, HTTPChannelHandler {
    struct Value: ServerChildChannelValue {
        let kind: EventLoopFuture<RelayConnectionKind>
        let channel: any Channel
    }

    let responder: HTTPChannelHandler.Responder
    let hub: RoomHub
    let limits: ConnectionLimits
    let groupJoins: GroupJoinLimit
    let headLimits: HTTP1Channel.Configuration.DecoderConfiguration

    init(
        responder: @escaping HTTPChannelHandler.Responder, hub: RoomHub, limits: ConnectionLimits, groupJoins: GroupJoinLimit,
        headLimits: HTTP1Channel.Configuration.DecoderConfiguration
    ) {
        self.responder = Self.redirectingLateUpgrades(responder)
        self.hub = hub
        self.limits = limits
        self.groupJoins = groupJoins
        self.headLimits = headLimits
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let hub = hub, limits = limits, groupJoins = groupJoins, headLimits = headLimits
        return channel.eventLoop.makeCompletedFuture {
            // NIO keeps a connection's last receive buffer for its next read,
            // so an idle room connection holds one: it starts at 512 bytes
            // (an upgrade request fits) rather than 2 KiB, and grows with the
            // traffic.
            try channel.syncOptions?.setOption(
                ChannelOptions.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536))
            let refusal = NIOLoopBoundBox<UpgradeRefusal?>(nil, eventLoop: channel.eventLoop)
            let upgrade = NIOTypedHTTPServerUpgradeConfiguration<RelayConnectionKind>(
                upgraders: [RoomUpgrader(hub: hub, groupJoins: groupJoins, refusal: refusal)],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try pipeline.addHandler(RequestTimer(limits: limits))
                        try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: nil, logger: logger))
                        let http = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        return refusal.value.map { .refusedUpgrade(http, $0) } ?? .http(http)
                    }
                })
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration(upgradeConfiguration: upgrade)
            // As Hummingbird's own channels: HTTP is pipelined by the async
            // channel, errors are answered by the relay (ParseErrorAnswer).
            configuration.enablePipelining = false
            configuration.enableErrorHandling = false
            configuration.enableResponseHeaderValidation = false
            configuration.decoderConfiguration.maxHeaderFieldSize = headLimits.maxHeaderFieldSize
            configuration.decoderConfiguration.maxHeaderListSize = headLimits.maxHeaderListSize
            configuration.decoderConfiguration.maxHeaderFieldCount = headLimits.maxHeaderFieldCount
            let kind = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            return Value(kind: kind, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.kind.get() {
            case .http(let http):
                await handleHTTP(asyncChannel: http, logger: logger)
            case .refusedUpgrade(let http, let refusal):
                try await http.executeThenClose { _, outbound in
                    try await outbound.write(contentsOf: refusal.answer)
                }
            case .room:
                // The caller closes the channel when this returns.
                try? await value.channel.closeFuture.get()
            }
        } catch {
            logger.trace("connection ended during its first request", metadata: ["error": "\(error)"])
        }
    }

    /// A valid WebSocket handshake after another request on the same
    /// connection cannot be upgraded any more (the upgrade handler has left
    /// the pipeline): it is sent back to the same path on a new connection,
    /// with 307 and `Connection: close`, as Hummingbird does.
    static func redirectingLateUpgrades(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        struct Redirected: Error {}
        return { request, writer, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                try await responder(request, writer, channel)
                return
            }
            var path = request.uri.path
            if let query = request.uri.query { path += "?\(query)" }
            try await writer.writeResponse(HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: path]))
            throw Redirected()
        }
    }
}

/// The opening handshake of a room or a group room (RFC 6455 4.2.2), checked and answered
/// by NIO's WebSocket upgrader; the upgrade itself puts a RoomConnection in
/// the pipeline, with no frame decoder or encoder beside it (it decodes
/// and encodes frames itself).
struct RoomUpgrader: NIOTypedHTTPServerProtocolUpgrader {
    typealias UpgradeResult = RelayConnectionKind

    let supportedProtocol = "websocket"
    let requiredUpgradeHeaders: [String] = []
    private let hub: RoomHub
    private let handshake: NIOTypedWebSocketServerUpgrader<RelayConnectionKind>

    /// `refusal` is set when a request asks for the upgrade, so that a
    /// refused one is answered (400, or 429 for a group-room join beyond
    /// `groupJoins`) rather than routed. A group-room join takes from the
    /// client's join budget here, before the upgrade: one refused takes
    /// no slot and its room hears nothing of it.
    init(hub: RoomHub, groupJoins: GroupJoinLimit, refusal: NIOLoopBoundBox<UpgradeRefusal?>) {
        self.hub = hub
        handshake = NIOTypedWebSocketServerUpgrader(
            shouldUpgrade: { channel, head in
                refusal.value = .badRequest
                guard let (kind, id) = RelayServer.roomPath(head.uri), RelayProtocol.isID(id) else {
                    hub.metrics.reject(.badID)
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                if kind == .group,
                    let seconds = groupJoins.take(
                        peer: channel.remoteAddress?.ipAddress ?? "unknown", forwardedFor: head.headers["X-Forwarded-For"])
                {
                    hub.metrics.reject(.rateLimited)
                    refusal.value = .rateLimited(seconds: seconds)
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                return channel.eventLoop.makeSucceededFuture(HTTPHeaders())
            },
            // Never called: `upgrade` below takes its place.
            upgradePipelineHandler: { channel, _ in channel.eventLoop.makeFailedFuture(ChannelError.inappropriateOperationForState) })
    }

    func buildUpgradeResponse(channel: any Channel, upgradeRequest: HTTPRequestHead, initialResponseHeaders: HTTPHeaders)
        -> EventLoopFuture<HTTPHeaders>
    {
        handshake.buildUpgradeResponse(channel: channel, upgradeRequest: upgradeRequest, initialResponseHeaders: initialResponseHeaders)
    }

    func upgrade(channel: any Channel, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<RelayConnectionKind> {
        let hub = hub
        return channel.eventLoop.makeCompletedFuture {
            guard let (kind, id) = RelayServer.roomPath(upgradeRequest.uri) else { throw ChannelError.inappropriateOperationForState }
            let pipeline = channel.pipeline.syncOperations
            // What guarded the HTTP request has done its work: every frame
            // read would pass through it for nothing. The connection stays
            // counted (the count ends with the channel, not the handler).
            if let answer = try? pipeline.handler(type: ParseErrorAnswer.self) {
                pipeline.removeHandler(answer, promise: nil)
            }
            if let connectionGuard = try? pipeline.handler(type: ConnectionGuard.self) {
                pipeline.removeHandler(connectionGuard, promise: nil)
            }
            try pipeline.addHandler(RoomConnection(kind: kind, roomID: id, hub: hub, loop: channel.eventLoop))
            return .room
        }
    }
}
