import Foundation
import ItsMeRelayProtocol

/// Everything the relay can be told (docs/PROTOCOL.md section 15); the
/// defaults are the ones the document states.
public struct RelayConfiguration: Sendable {
    /// The port itsme-relay listens on unless told otherwise: 4863, "ITME"
    /// on a telephone keypad, a port IANA has assigned to no service.
    public static let defaultPort = 4863

    /// Loopback by default: a relay reachable from elsewhere is a choice
    /// (and, without TLS, warned about).
    public var host = "127.0.0.1"
    /// 0 picks a free port.
    public var port = RelayConfiguration.defaultPort
    /// The SQLite file, `:memory:` to keep everything in memory, or a
    /// `postgres://` URL. itsme-relay picks a file in its state directory
    /// when given none (`itsme-relay --help`); a program embedding the relay
    /// sets it.
    public var databasePath = ":memory:"
    public var backlog = 4096

    /// Open connections in all, and per client address.
    public var maxConnections = 4096
    public var maxConnectionsPerAddress = 64
    /// Largest binary message in a room, two-party or group.
    public var maxFrame = 65_536
    /// Peers in a group room at once (2 to 250), and joins over a group
    /// room's life (2 to 65,535: a slot is 2 bytes).
    public var maxGroup = 50
    public var maxGroupJoins = 200
    /// Largest invite message, and messages per side of an invite.
    public var maxMessage = 65_536
    public var maxMessagesPerSide = 16
    public var maxRecord = 262_144
    public var maxInvites = 100_000
    /// Misses on invite routes, and creations (invites, records), per client
    /// address and minute.
    public var lookupRatePerMinute = 20
    public var createRatePerMinute = 60
    /// Group-room joins per client address and minute (1 to 1,000,000): a
    /// join beyond is refused before the upgrade, so that one address cannot
    /// churn a group room (each new peer starts a new roll-call round).
    public var groupJoinRatePerMinute = 60
    /// Seconds without a binary frame or a peer's ping before a room, two-party or group, closes.
    public var roomIdleSeconds = 120.0
    /// Seconds between two of the relay's pings to a room connection.
    public var pingIntervalSeconds = 30.0
    /// Seconds a request may take to arrive whole.
    public var requestTimeoutSeconds = 10.0
    /// Longest hold of an invite fetch.
    public var maxWaitSeconds = Double(RelayProtocol.maxFetchWait)
    /// Seconds a graceful shutdown may take.
    public var shutdownTimeoutSeconds = 10.0
    /// The proxies whose X-Forwarded-For is believed, and whose
    /// connections the per-address limit does not count.
    public var trustedProxies = TrustedProxies()
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// Tests only: read the current time from this file.
    public var clockFile: String?

    public static let inviteLifetime: Int64 = 24 * 3600
    public static let sweepInterval: Duration = .seconds(60)

    public init() {}
}
