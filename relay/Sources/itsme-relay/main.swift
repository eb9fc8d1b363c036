import ArgumentParser
import Foundation
import ItsMeRelay
import Logging

/// `itsme-relay`: flags, with environment fallbacks (ITSME_RELAY_<FLAG>, e.g.
/// ITSME_RELAY_MAX_CONNECTIONS), then the defaults of docs/PROTOCOL.md 15.
@main
struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "itsme-relay",
        abstract: "The ItsMe relay: invite mailbox, two-party WebSocket rooms, immutable records.",
        discussion: """
            Every flag can also be set in the environment as ITSME_RELAY_ and the flag's name in capitals with \
            underscores (ITSME_RELAY_PORT, ITSME_RELAY_MAX_CONNECTIONS, ...); a flag wins over the environment. \
            Prints one line, "itsme-relay listening on URL", once it accepts connections; logs go to standard error. \
            SIGTERM or SIGINT: stop accepting, close rooms with 1001, exit within --shutdown-timeout seconds.
            """)

    @Option(help: "Address to listen on.") var host: String?
    @Option(help: "Port; 0 picks a free one (printed).") var port: Int?
    @Option(help: "SQLite database file (:memory: for none).") var database: String?
    @Option(help: "Open connections in all.") var maxConnections: Int?
    @Option(help: "Open connections per client address.") var maxConnectionsPerAddress: Int?
    @Option(help: "Largest room message, in bytes.") var maxFrame: Int?
    @Option(help: "Largest invite message, in bytes.") var maxMessage: Int?
    @Option(help: "Messages per side of an invite.") var maxMessages: Int?
    @Option(help: "Largest record, in bytes.") var maxRecord: Int?
    @Option(help: "Live invites in all.") var maxInvites: Int?
    @Option(help: "Misses on invite routes per client address and minute.") var lookupRate: Int?
    @Option(help: "Invites and records created per client address and minute.") var createRate: Int?
    @Option(help: "Seconds without a binary frame or a peer's ping before a room closes.") var roomIdle: Double?
    @Option(help: "Seconds a request may take to arrive whole.") var requestTimeout: Double?
    @Option(help: "Seconds a graceful shutdown may take.") var shutdownTimeout: Double?
    @Option(help: "Address of the one proxy whose X-Forwarded-For is believed.") var trustedProxy: String?
    @Option(help: "PEM certificate chain; with --tls-key, serve HTTPS and WSS.") var tlsCert: String?
    @Option(help: "PEM private key for --tls-cert.") var tlsKey: String?
    @Option(help: "Tests only: read the current Unix time from this file.") var clockFile: String?
    @Option(help: "Log level: info (the default), notice, warning, error, critical.") var logLevel: String?

    func validate() throws {
        if (tlsCert ?? env("TLS_CERT") == nil) != (tlsKey ?? env("TLS_KEY") == nil) {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
    }

    private func env(_ name: String) -> String? {
        ProcessInfo.processInfo.environment["ITSME_RELAY_" + name]
    }

    private func value<T: LosslessStringConvertible>(_ flag: T?, _ name: String, _ fallback: T) throws -> T {
        if let flag { return flag }
        guard let text = env(name) else { return fallback }
        guard let parsed = T(text) else { throw ValidationError("ITSME_RELAY_\(name)=\(text) is not a valid value") }
        return parsed
    }

    func run() async throws {
        var c = RelayConfiguration()
        c.host = try value(host, "HOST", c.host)
        c.port = try value(port, "PORT", c.port)
        c.databasePath = try value(database, "DATABASE", c.databasePath)
        c.maxConnections = try value(maxConnections, "MAX_CONNECTIONS", c.maxConnections)
        c.maxConnectionsPerAddress = try value(maxConnectionsPerAddress, "MAX_CONNECTIONS_PER_ADDRESS", c.maxConnectionsPerAddress)
        c.maxFrame = try value(maxFrame, "MAX_FRAME", c.maxFrame)
        c.maxMessage = try value(maxMessage, "MAX_MESSAGE", c.maxMessage)
        c.maxMessagesPerSide = try value(maxMessages, "MAX_MESSAGES", c.maxMessagesPerSide)
        c.maxRecord = try value(maxRecord, "MAX_RECORD", c.maxRecord)
        c.maxInvites = try value(maxInvites, "MAX_INVITES", c.maxInvites)
        c.lookupRatePerMinute = try value(lookupRate, "LOOKUP_RATE", c.lookupRatePerMinute)
        c.createRatePerMinute = try value(createRate, "CREATE_RATE", c.createRatePerMinute)
        c.roomIdleSeconds = try value(roomIdle, "ROOM_IDLE", c.roomIdleSeconds)
        c.requestTimeoutSeconds = try value(requestTimeout, "REQUEST_TIMEOUT", c.requestTimeoutSeconds)
        c.shutdownTimeoutSeconds = try value(shutdownTimeout, "SHUTDOWN_TIMEOUT", c.shutdownTimeoutSeconds)
        c.trustedProxy = trustedProxy ?? env("TRUSTED_PROXY")
        c.tlsCertificatePath = tlsCert ?? env("TLS_CERT")
        c.tlsKeyPath = tlsKey ?? env("TLS_KEY")
        c.clockFile = clockFile ?? env("CLOCK_FILE")
        for (name, number) in [
            ("--max-connections", c.maxConnections), ("--max-connections-per-address", c.maxConnectionsPerAddress),
            ("--max-frame", c.maxFrame), ("--max-message", c.maxMessage), ("--max-messages", c.maxMessagesPerSide),
            ("--max-record", c.maxRecord), ("--max-invites", c.maxInvites), ("--lookup-rate", c.lookupRatePerMinute),
            ("--create-rate", c.createRatePerMinute),
        ] where number < 1 {
            throw ValidationError("\(name) must be at least 1")
        }
        guard (0...65535).contains(c.port) else { throw ValidationError("--port must be 0 to 65535") }
        for (name, seconds) in [
            ("--room-idle", c.roomIdleSeconds), ("--request-timeout", c.requestTimeoutSeconds),
            ("--shutdown-timeout", c.shutdownTimeoutSeconds),
        ] where !(seconds > 0 && seconds <= 86400) {
            throw ValidationError("\(name) must be more than 0 and at most 86400 seconds")
        }

        let level = try value(logLevel.flatMap(Logger.Level.init(rawValue:)), "LOG_LEVEL", Logger.Level.info)
        // Below info, the HTTP stack logs request paths, which carry full
        // IDs: the relay's logs never do.
        guard level >= .info else { throw ValidationError("--log-level is info, notice, warning, error or critical") }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "itsme-relay")
        do {
            try await RelayServer(configuration: c, logger: logger).run { url in
                FileHandle.standardOutput.write(Data("itsme-relay listening on \(url)\n".utf8))
            }
        } catch {
            FileHandle.standardError.write(Data("itsme-relay: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}

extension Logger.Level: @retroactive LosslessStringConvertible {
    public init?(_ description: String) { self.init(rawValue: description) }
}
