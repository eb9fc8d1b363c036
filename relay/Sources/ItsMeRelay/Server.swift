import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import NIOWebSocket
import HTTPTypes
import ItsMeCore
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle

/// The relay: builds every part from a configuration and runs until SIGTERM
/// or SIGINT (docs/PROTOCOL.md section 15).
public struct RelayServer: Sendable {
    let configuration: RelayConfiguration
    let logger: Logger
    let openStorage: @Sendable (RelayConfiguration) async throws -> any RelayStorage

    /// `openStorage` opens the backend the relay keeps invites and records
    /// in; by default the SQLite file of `configuration.databasePath`.
    public init(
        configuration: RelayConfiguration, logger: Logger,
        openStorage: @escaping @Sendable (RelayConfiguration) async throws -> any RelayStorage = { configuration in
            try SQLiteRelayStorage(path: configuration.databasePath)
        }
    ) {
        self.configuration = configuration
        self.logger = logger
        self.openStorage = openStorage
    }

    /// Runs the relay. `onListening` gets the URL it listens on, once bound.
    public func run(onListening: @escaping @Sendable (String) -> Void) async throws {
        try Sodium.initialize()
        let configuration = configuration
        let storage = try await openStorage(configuration)
        let clock = RelayClock(file: configuration.clockFile)
        let metrics = RelayMetrics()
        let hub = RoomHub(metrics: metrics)
        let waiters = InviteWaiters()
        let lookups = RateLimiter(ratePerMinute: configuration.lookupRatePerMinute)
        let creations = RateLimiter(ratePerMinute: configuration.createRatePerMinute)
        let limits = ConnectionLimits(
            counter: ConnectionCounter(
                maxTotal: configuration.maxConnections, maxPerAddress: configuration.maxConnectionsPerAddress,
                exempt: configuration.trustedProxies),
            metrics: metrics,
            requestTimeout: .milliseconds(Int64(configuration.requestTimeoutSeconds * 1000)))

        let responder = RelayResponder(
            configuration: configuration, storage: storage, clock: clock, metrics: metrics, waiters: waiters,
            lookups: lookups, creations: creations, logger: logger)

        let webSocket = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(
                additionalChannelHandlers: [RequestTimer(limits: limits)], idleTimeout: nil,
                httpDecoderConfiguration: Self.headLimits),
            ws: .init(maxFrameSize: configuration.maxFrame, autoPing: .enabled(timePeriod: .seconds(30)), closeTimeout: .seconds(5)))
        let maxFrame = configuration.maxFrame
        let logger = logger
        let shouldUpgrade:
            @Sendable (HTTPRequest, any Channel, Logger) throws -> ShouldUpgradeResult<
                WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>
            > = { head, channel, _ in
                guard let id = Self.roomID(head.path), RelayID.isValid(id) else {
                    metrics.reject("bad-id")
                    return .dontUpgrade
                }
                return .upgrade([:]) { inbound, outbound, _ in
                    try await Self.serveRoom(
                        id, inbound, outbound, channel: channel, hub: hub, metrics: metrics, maxFrame: maxFrame, logger: logger)
                }
            }
        var tls: TLSConfiguration?
        if let cert = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        }
        let scheme = tls == nil ? "http" : "https"
        // TLS first, then the connection guard (which sees decrypted bytes),
        // then HTTP with the WebSocket upgrade.
        let server = HTTPServerBuilder { [tls] responder in
            let guarded = GuardedChannel(
                base: HTTP1WebSocketUpgradeChannel(responder: responder, configuration: webSocket, shouldUpgrade: shouldUpgrade),
                limits: limits)
            if let tls { return try TLSChannel(guarded, tlsConfiguration: tls) }
            return guarded
        }

        let host = configuration.host
        let app = Application(
            responder: responder,
            server: server,
            configuration: .init(address: .hostname(host, port: configuration.port), serverName: nil, backlog: configuration.backlog),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                onListening("\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)")
            },
            logger: logger)

        let housekeeping = Housekeeping(
            configuration: configuration, storage: storage, clock: clock, metrics: metrics, hub: hub, waiters: waiters,
            limiters: [lookups, creations], logger: logger)
        var group = ServiceGroupConfiguration(
            services: [
                .init(service: app),
                .init(service: housekeeping, successTerminationBehavior: .gracefullyShutdownGroup),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        group.maximumGracefulShutdownDuration = Duration.milliseconds(Int64(configuration.shutdownTimeoutSeconds * 1000))
        group.maximumCancellationDuration = Duration.seconds(2)
        try await ServiceGroup(configuration: group).run()
        logger.info("stopped")
    }

    /// What the relay reads of a request head (docs/PROTOCOL.md 15.5): no
    /// request of its API comes near; a head beyond is answered 431.
    static let headLimits = HTTP1Channel.Configuration.DecoderConfiguration(
        maxHeaderFieldSize: 8 * 1024, maxHeaderListSize: 32 * 1024, maxHeaderFieldCount: 100)

    /// The ID in `/v1/rooms/{id}`, or nil for another path.
    static func roomID(_ path: String?) -> String? {
        guard let path else { return nil }
        let bare = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let parts = bare.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].isEmpty, parts[1] == "v1", parts[2] == "rooms" else { return nil }
        return String(parts[3])
    }

    /// One peer's life in a room (docs/PROTOCOL.md 15.3).
    static func serveRoom(
        _ id: String, _ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter, channel: any Channel,
        hub: RoomHub, metrics: RelayMetrics, maxFrame: Int, logger: Logger
    ) async throws {
        let peer = hub.makePeer(outbound)
        let (room, joined) = hub.join(id, peer)
        if case .full = joined {
            if hub.isShuttingDown {
                await peer.close(.goingAway, "relay shutting down")
            } else {
                metrics.reject("room-full")
                await peer.close(.unknown(4009), "room full")
            }
            return
        }
        // Before the first event, so that a ping sent in answer to it counts.
        // The WebSocket layer answers every ping with a pong and never hands
        // it on: pings are not forwarded.
        do {
            try await PingObserver.install(on: channel, room: room)
        } catch where channel.isActive {
            logger.warning("pings will not keep this room open", metadata: ["room": "\(RelayID.short(id))", "error": "\(error)"])
        } catch {}
        switch joined {
        case .full:
            return
        case .alone:
            await peer.send(event: "waiting")
        case .paired(let first):
            await peer.send(event: "peer-joined")
            await first.send(event: "peer-joined")
        }
        do {
            loop: for try await message in inbound.messages(maxSize: maxFrame) {
                switch message {
                case .binary(let buffer):
                    if let other = room.other(than: peer) {
                        // Awaited on this peer's task, never handed to
                        // another: forwards go out in arrival order, and
                        // `hub.leave` (peer-left) runs on this same task
                        // after the last of them (PROTOCOL.md 15.3, Order).
                        try? await other.outbound.write(.binary(buffer))
                        metrics.framesForwarded.increment()
                    } else {
                        metrics.reject("no-peer")
                        try? await outbound.write(.text(#"{"type":"refused","reason":"no-peer"}"#))
                    }
                case .text:
                    metrics.reject("bad-request")
                    await peer.close(.unacceptableData, "peers send binary frames only")
                    break loop
                }
            }
        } catch {
            // The WebSocket layer closes with the code the error carries
            // (1009 for a message over the limit), once the room is left.
            if String(describing: error).contains("messageTooLarge") { metrics.reject("too-large") }
            await hub.leave(room, peer)
            throw error
        }
        await hub.leave(room, peer)
    }
}
