import Foundation
import Hummingbird
import HummingbirdCore
import HTTPTypes
import ItsMePrimitives
import ItsMeRelayProtocol
import Logging
import NIOCore
import NIOPosix
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
        let hub = RoomHub(
            metrics: metrics, maxFrame: configuration.maxFrame, pingInterval: configuration.pingIntervalSeconds,
            maxGroup: configuration.maxGroup, maxGroupJoins: configuration.maxGroupJoins)
        let waiters = InviteWaiters()
        let lookups = RateLimiter(ratePerMinute: configuration.lookupRatePerMinute)
        let creations = RateLimiter(ratePerMinute: configuration.createRatePerMinute)
        let groupJoins = GroupJoinLimit(
            limiter: RateLimiter(ratePerMinute: configuration.groupJoinRatePerMinute), trustedProxies: configuration.trustedProxies)
        let limits = ConnectionLimits(
            counter: ConnectionCounter(
                maxTotal: configuration.maxConnections, maxPerAddress: configuration.maxConnectionsPerAddress,
                exempt: configuration.trustedProxies),
            metrics: metrics,
            requestTimeout: .milliseconds(Int64(configuration.requestTimeoutSeconds * 1000)))

        let responder = RelayResponder(
            configuration: configuration, storage: storage, clock: clock, metrics: metrics, waiters: waiters,
            lookups: lookups, creations: creations, logger: logger)

        // One reloader for the process: each connection takes its context
        // when accepted, so a certificate renewed and signalled (SIGHUP)
        // serves new connections without touching open ones.
        var reloader: TLSReloader?
        if let cert = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            let made = try TLSReloader(certificatePath: cert, keyPath: key, logger: logger)
            made.watchSIGHUP()
            reloader = made
        }
        let scheme = reloader == nil ? "http" : "https"
        // TLS first, then the connection guard (which sees decrypted bytes),
        // then HTTP, whose WebSocket upgrade of a room path hands the
        // connection to the rooms' own pipeline (RelayChannel).
        let server = HTTPServerBuilder { [reloader] responder in
            let guarded = GuardedChannel(
                base: RelayChannel(responder: responder, hub: hub, limits: limits, groupJoins: groupJoins, headLimits: Self.headLimits),
                limits: limits)
            if let reloader { return ReloadingTLSChannel(base: guarded, reloader: reloader) }
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
            eventLoopGroupProvider: .shared(Self.eventLoops),
            logger: logger)

        let housekeeping = Housekeeping(
            configuration: configuration, storage: storage, clock: clock, metrics: metrics, hub: hub, waiters: waiters,
            limiters: [lookups, creations, groupJoins.limiter], logger: logger)
        var group = ServiceGroupConfiguration(
            services: [
                .init(service: app),
                .init(service: housekeeping, successTerminationBehavior: .gracefullyShutdownGroup),
                .init(service: RoomKeepAlive(hub: hub), successTerminationBehavior: .ignore),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        group.maximumGracefulShutdownDuration = Duration.milliseconds(Int64(configuration.shutdownTimeoutSeconds * 1000))
        group.maximumCancellationDuration = Duration.seconds(2)
        try await ServiceGroup(configuration: group).run()
        logger.info("stopped")
    }

    /// The relay's network I/O runs on one event loop: both connections of
    /// every room then live on the same thread, so a forwarded burst is
    /// written to the other peer at once, never handed across threads
    /// (a wake-up of the other loop per burst, which costs more than the
    /// forwarding itself when bursts are single messages). Requests are
    /// answered on Swift's concurrency pool, not on this loop; more cores
    /// are used by running more instances (docs/OPERATIONS.md).
    static let eventLoops = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    /// What the relay reads of a request head (docs/PROTOCOL.md 15.5): no
    /// request of its API comes near; a head beyond is answered 431.
    static let headLimits = HTTP1Channel.Configuration.DecoderConfiguration(
        maxHeaderFieldSize: 8 * 1024, maxHeaderListSize: 32 * 1024, maxHeaderFieldCount: 100)

    /// The kind and the ID of `/v1/rooms/{id}` (a two-party room) or
    /// `/v1/groups/{id}` (a group room), or nil for another path.
    static func roomPath(_ path: String?) -> (RoomKind, String)? {
        guard let path else { return nil }
        switch RelayPath(path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]) {
        case .room(let id): return (.pair, id)
        case .group(let id): return (.group, id)
        default: return nil
        }
    }
}
