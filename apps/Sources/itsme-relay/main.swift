import ArgumentParser
import Dispatch
import Foundation
import RelayServer
import Logging

// The module has more files than this one, so this is top-level code rather
// than `@main`.
await RelayCommand.start()

/// `itsme-relay`: flags, with environment fallbacks (ITSME_RELAY_<FLAG>, e.g.
/// ITSME_RELAY_MAX_CONNECTIONS), then the defaults of docs/PROTOCOL.md 15.
struct RelayCommand: AsyncParsableCommand {
    /// The defaults `--help` shows: the configuration's own.
    static let defaults = RelayConfiguration()

    /// What ArgumentParser's asynchronous `main` does. Top-level code calls
    /// its synchronous `main` instead, which refuses an asynchronous
    /// command; in an asynchronous function the asynchronous `run` is the
    /// one called.
    static func start() async {
        do {
            var command = try await asyncParseAsRoot()
            if var asynchronous = command as? AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    static let configuration = CommandConfiguration(
        commandName: "itsme-relay",
        abstract: "The ItsMe relay: invite mailbox, two-party and group WebSocket rooms, immutable records.",
        discussion: """
            Every flag can also be set in the environment as ITSME_RELAY_ and the flag's name in capitals with \
            underscores (ITSME_RELAY_PORT, ITSME_RELAY_MAX_CONNECTIONS, ...); a flag wins over the environment. \
            Prints one line, "itsme-relay listening on URL", once it accepts connections; logs go to standard error.

            The database, without --database: itsme-relay.db in $STATE_DIRECTORY (set by systemd's StateDirectory=; \
            the first directory if it lists several), else in /var/lib/itsme-relay if that can be written, else \
            itsme-relay refuses to start. The directory is made 0700, the file and its -wal and -shm logs 0600.

            Listening beyond loopback without --tls-cert logs a warning: put TLS in front (nginx) or give a certificate.

            Signals: SIGTERM or SIGINT stop accepting, close rooms and group rooms with 1001, and exit within --shutdown-timeout \
            seconds. SIGHUP reloads --tls-cert and --tls-key without dropping connections (a bad file keeps the \
            previous certificate, and is logged).

            Running it in production: docs/OPERATIONS.md.
            """)

    @Option(help: "Address to listen on; 0.0.0.0 or :: for every interface (default: \(RelayCommand.defaults.host)).")
    var host: String?
    @Option(help: "Port; 0 picks a free one, printed (default: \(RelayConfiguration.defaultPort)).")
    var port: Int?
    @Option(
        help: ArgumentHelp(
            "SQLite database file, :memory: for none, or a postgres:// URL (default: itsme-relay.db in $STATE_DIRECTORY, else in /var/lib/itsme-relay).",
            valueName: "path-or-url"))
    var database: String?
    @Option(help: "Open connections in all (default: \(RelayCommand.defaults.maxConnections)).")
    var maxConnections: Int?
    @Option(help: "Open connections per client address; a trusted proxy's are not counted (default: \(RelayCommand.defaults.maxConnectionsPerAddress)).")
    var maxConnectionsPerAddress: Int?
    @Option(help: "Largest room message, in bytes (default: \(RelayCommand.defaults.maxFrame)).")
    var maxFrame: Int?
    @Option(help: "Peers in a group room at once, 2 to 250 (default: \(RelayCommand.defaults.maxGroup)).")
    var maxGroup: Int?
    @Option(help: "Joins over a group room's life, 2 to 65535; each join takes a new slot (default: \(RelayCommand.defaults.maxGroupJoins)).")
    var maxGroupJoins: Int?
    @Option(help: "Largest invite message, in bytes (default: \(RelayCommand.defaults.maxMessage)).")
    var maxMessage: Int?
    @Option(help: "Messages per side of an invite (default: \(RelayCommand.defaults.maxMessagesPerSide)).")
    var maxMessages: Int?
    @Option(help: "Largest record, in bytes (default: \(RelayCommand.defaults.maxRecord)).")
    var maxRecord: Int?
    @Option(help: "Live invites in all (default: \(RelayCommand.defaults.maxInvites)).")
    var maxInvites: Int?
    @Option(help: "Misses on invite routes per client address and minute (default: \(RelayCommand.defaults.lookupRatePerMinute)).")
    var lookupRate: Int?
    @Option(help: "Invites and records created per client address and minute (default: \(RelayCommand.defaults.createRatePerMinute)).")
    var createRate: Int?
    @Option(help: "Group-room joins per client address and minute, 1 to 1000000; one beyond is refused with 429 before the upgrade (default: \(RelayCommand.defaults.groupJoinRatePerMinute)).")
    var groupJoinRate: Int?
    @Option(help: "Seconds without a binary frame or a peer's ping before a room closes (default: \(Int(RelayCommand.defaults.roomIdleSeconds))).")
    var roomIdle: Double?
    @Option(help: "Seconds between two of the relay's pings to a room connection; one not answered by the next closes it (default: \(Int(RelayCommand.defaults.pingIntervalSeconds))).")
    var pingInterval: Double?
    @Option(help: "Seconds a request may take to arrive whole (default: \(Int(RelayCommand.defaults.requestTimeoutSeconds))).")
    var requestTimeout: Double?
    @Option(help: "Seconds a graceful shutdown may take (default: \(Int(RelayCommand.defaults.shutdownTimeoutSeconds))).")
    var shutdownTimeout: Double?
    @Option(
        help: ArgumentHelp(
            "A proxy whose X-Forwarded-For is believed: an address or CIDR range, IPv4 or IPv6; repeat the flag or separate with commas (default: none).",
            valueName: "address-or-cidr"))
    var trustedProxy: [String] = []
    @Option(help: ArgumentHelp("PEM certificate chain; with --tls-key, serve HTTPS and WSS (default: none, plain HTTP).", valueName: "file"))
    var tlsCert: String?
    @Option(help: ArgumentHelp("PEM private key for --tls-cert (default: none).", valueName: "file"))
    var tlsKey: String?
    @Option(help: ArgumentHelp("Tests only: read the current Unix time from this file (default: the system clock).", valueName: "file"))
    var clockFile: String?
    @Option(help: "Log level: info, notice, warning, error, critical (default: info).")
    var logLevel: String?
    @Option(help: "Log format: text, or json for one JSON object a line (default: text).")
    var logFormat: String?

    func validate() throws {
        if (tlsCert ?? env("TLS_CERT") == nil) != (tlsKey ?? env("TLS_KEY") == nil) {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
    }

    private func env(_ name: String) -> String? {
        ProcessInfo.processInfo.environment["ITSME_RELAY_" + name].flatMap { $0.isEmpty ? nil : $0 }
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
        c.maxConnections = try value(maxConnections, "MAX_CONNECTIONS", c.maxConnections)
        c.maxConnectionsPerAddress = try value(maxConnectionsPerAddress, "MAX_CONNECTIONS_PER_ADDRESS", c.maxConnectionsPerAddress)
        c.maxFrame = try value(maxFrame, "MAX_FRAME", c.maxFrame)
        c.maxGroup = try value(maxGroup, "MAX_GROUP", c.maxGroup)
        c.maxGroupJoins = try value(maxGroupJoins, "MAX_GROUP_JOINS", c.maxGroupJoins)
        c.maxMessage = try value(maxMessage, "MAX_MESSAGE", c.maxMessage)
        c.maxMessagesPerSide = try value(maxMessages, "MAX_MESSAGES", c.maxMessagesPerSide)
        c.maxRecord = try value(maxRecord, "MAX_RECORD", c.maxRecord)
        c.maxInvites = try value(maxInvites, "MAX_INVITES", c.maxInvites)
        c.lookupRatePerMinute = try value(lookupRate, "LOOKUP_RATE", c.lookupRatePerMinute)
        c.createRatePerMinute = try value(createRate, "CREATE_RATE", c.createRatePerMinute)
        c.groupJoinRatePerMinute = try value(groupJoinRate, "GROUP_JOIN_RATE", c.groupJoinRatePerMinute)
        c.roomIdleSeconds = try value(roomIdle, "ROOM_IDLE", c.roomIdleSeconds)
        c.pingIntervalSeconds = try value(pingInterval, "PING_INTERVAL", c.pingIntervalSeconds)
        c.requestTimeoutSeconds = try value(requestTimeout, "REQUEST_TIMEOUT", c.requestTimeoutSeconds)
        c.shutdownTimeoutSeconds = try value(shutdownTimeout, "SHUTDOWN_TIMEOUT", c.shutdownTimeoutSeconds)
        do {
            c.trustedProxies = try TrustedProxies(parsing: trustedProxy.isEmpty ? env("TRUSTED_PROXY").map { [$0] } ?? [] : trustedProxy)
        } catch {
            throw ValidationError("\(error)")
        }
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
        guard (2...250).contains(c.maxGroup) else { throw ValidationError("--max-group must be 2 to 250") }
        // A slot goes out as 2 bytes in front of each message.
        guard (2...65535).contains(c.maxGroupJoins) else { throw ValidationError("--max-group-joins must be 2 to 65535") }
        guard (1...1_000_000).contains(c.groupJoinRatePerMinute) else {
            throw ValidationError("--group-join-rate must be 1 to 1000000 joins a minute")
        }
        for (name, seconds) in [
            ("--room-idle", c.roomIdleSeconds), ("--ping-interval", c.pingIntervalSeconds), ("--request-timeout", c.requestTimeoutSeconds),
            ("--shutdown-timeout", c.shutdownTimeoutSeconds),
        ] where !(seconds > 0 && seconds <= 86400) {
            throw ValidationError("\(name) must be more than 0 and at most 86400 seconds")
        }

        let level = try value(logLevel.flatMap(Logger.Level.init(rawValue:)), "LOG_LEVEL", Logger.Level.info)
        // Below info, the HTTP stack logs request paths, which carry full
        // IDs: the relay's logs never do.
        guard level >= .info else { throw ValidationError("--log-level is info, notice, warning, error or critical") }
        let format = logFormat ?? env("LOG_FORMAT") ?? "text"
        guard format == "text" || format == "json" else { throw ValidationError("--log-format is text or json") }
        LoggingSystem.bootstrap { label in
            if format == "json" { return JSONLogHandler(label: label, level: level) }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "itsme-relay")

        do {
            c.databasePath = try DatabaseLocation.resolve(database ?? env("DATABASE"))
            if let cert = c.tlsCertificatePath, let key = c.tlsKeyPath {
                // Read once here too (the server's reloader reads them as it
                // starts, and logs what it finds), so that a bad file is one
                // clear line before anything starts or is logged.
                let silent = Logger(label: "itsme-relay") { _ in SwiftLogNoOpLogHandler() }
                _ = try TLSReloader(certificatePath: cert, keyPath: key, logger: silent)
            }
        } catch {
            FileHandle.standardError.write(Data("itsme-relay: \(error)\n".utf8))
            throw ExitCode(1)
        }
        // A SIGHUP never ends the relay: with TLS, the server's reloader
        // takes it; without, there is nothing to reload.
        signal(SIGHUP, SIG_IGN)
        let hangup = c.tlsCertificatePath == nil ? Self.logHangups(logger) : nil
        defer { hangup?.cancel() }

        logger.info(
            "starting",
            metadata: [
                "database": "\(DatabaseLocation.shown(c.databasePath))", "trusted-proxies": "\(c.trustedProxies)",
                "tls": "\(c.tlsCertificatePath == nil ? "off" : "on")",
            ])
        if c.tlsCertificatePath == nil, !Self.isLoopback(c.host) {
            logger.warning(
                "listening beyond loopback without TLS: tokens and traffic cross the network in clear; put a TLS proxy in front (docs/OPERATIONS.md) or pass --tls-cert and --tls-key",
                metadata: ["host": "\(c.host)"])
        }
        do {
            try await RelayServer(configuration: c, logger: logger, openStorage: openStorage).run { url in
                FileHandle.standardOutput.write(Data("itsme-relay listening on \(url)\n".utf8))
            }
        } catch {
            FileHandle.standardError.write(Data("itsme-relay: \(DatabaseLocation.scrubbed("\(error)", c.databasePath))\n".utf8))
            throw ExitCode(1)
        }
    }

    /// Logs each SIGHUP of a relay without TLS.
    private static func logHangups(_ logger: Logger) -> any DispatchSourceSignal {
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "itsme-relay.sighup"))
        source.setEventHandler { logger.notice("SIGHUP: no TLS certificate to reload") }
        source.resume()
        return source
    }

    /// 127.0.0.0/8, ::1 and `localhost`: nobody else can connect.
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        let loopback = try? TrustedProxies(parsing: ["127.0.0.0/8", "::1"])
        return loopback?.contains(host) ?? false
    }
}

extension Logger.Level: @retroactive LosslessStringConvertible {
    public init?(_ description: String) { self.init(rawValue: description) }
}
