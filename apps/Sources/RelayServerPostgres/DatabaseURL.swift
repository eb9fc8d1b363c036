import Foundation
import NIOSSL
import PostgresNIO

/// A `postgres://` or `postgresql://` connection string, in the form libpq
/// reads: `postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=MODE`.
/// USER and PASSWORD may be percent-encoded; PORT defaults to 5432 and
/// DATABASE to USER. Without a host, or with `?host=/a/directory`, the
/// server's Unix socket in that directory (default /var/run/postgresql).
/// The password may instead be given as `?password=`.
/// `sslmode` is `disable`, `prefer` (the default, as libpq's), `require`
/// (encrypted, the certificate not checked, as libpq's) or `verify-full`
/// (the certificate checked against the system's CAs, or `sslrootcert`'s).
///
/// The password is kept out of every description: `redacted` is what logs
/// and errors show.
public struct DatabaseURL: Sendable {
    public enum Mode: String, Sendable { case disable, prefer, require, verifyFull = "verify-full" }

    public let user: String
    let password: String?
    public let host: String?
    public let socketPath: String?
    public let port: Int
    public let database: String
    public let mode: Mode
    public let rootCertificate: String?

    /// True for a string this backend takes (`postgres://...`, `postgresql://...`).
    public static func isPostgres(_ text: String) -> Bool {
        let lower = text.lowercased()
        return lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://")
    }

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    public init(_ text: String) throws {
        // Errors name the part that is wrong, never echo the string (it may
        // hold a password).
        func invalid(_ why: String) -> Invalid {
            Invalid(description: "the database URL is not valid: \(why) (form: postgres://USER:PASSWORD@HOST:PORT/DATABASE)")
        }
        guard Self.isPostgres(text), let components = URLComponents(string: text) else {
            throw invalid("it is not a postgres:// URL with percent-encoded user and password")
        }
        guard let user = components.user?.removingPercentEncoding ?? components.user, !user.isEmpty else {
            throw invalid("it names no user")
        }
        self.user = user
        var password = components.password.map { $0.removingPercentEncoding ?? $0 }
        if components.port != nil, !(1...65535).contains(components.port ?? 0) {
            throw invalid("the port is not 1 to 65535")
        }
        port = components.port ?? 5432
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let name = path.removingPercentEncoding ?? path
        guard !name.contains("/") else { throw invalid("the database name holds a /") }
        database = name.isEmpty ? user : name

        var mode = Mode.prefer
        var socketDirectory: String?
        var rootCertificate: String?
        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "sslmode":
                guard let parsed = Mode(rawValue: value) else {
                    throw invalid("sslmode is disable, prefer, require or verify-full")
                }
                mode = parsed
            case "host":
                guard value.hasPrefix("/") else { throw invalid("?host= takes the directory of a Unix socket") }
                socketDirectory = value
            case "password":
                password = value
            case "sslrootcert":
                guard !value.isEmpty else { throw invalid("sslrootcert takes a PEM file") }
                rootCertificate = value
            default:
                throw invalid("unknown parameter \(item.name.prefix(32)) (known: sslmode, sslrootcert, host, password)")
            }
        }
        self.password = password
        self.mode = mode
        self.rootCertificate = rootCertificate
        let host = components.host.flatMap { $0.isEmpty ? nil : $0 }
        if let socketDirectory, host != nil { throw invalid("give either a host or ?host=/socket/directory") }
        if let host {
            // URLComponents keeps the brackets of an IPv6 address.
            self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            socketPath = nil
        } else {
            self.host = nil
            socketPath = "\(socketDirectory ?? "/var/run/postgresql")/.s.PGSQL.\(port)"
        }
    }

    /// The URL without its password, for logs and errors.
    public var redacted: String {
        let place = host.map { $0.contains(":") ? "[\($0)]:\(port)" : "\($0):\(port)" } ?? "(socket \(socketPath ?? ""))"
        return "postgres://\(user)@\(place)/\(database)"
    }

    private func tlsConfiguration() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if mode != .verifyFull { tls.certificateVerification = .none }
        if let rootCertificate { tls.trustRoots = .file(rootCertificate) }
        return tls
    }

    /// The configuration of the pool (`PostgresClient.Configuration`) or of
    /// a connection of its own (`PostgresConnection.Configuration`): the
    /// same server, TLS, connect timeout and application name.
    private func configuration<Configuration: PostgresConfiguration>() throws -> Configuration {
        var configuration: Configuration
        if let host {
            let tls = try Configuration.tls(mode == .disable ? nil : tlsConfiguration(), required: mode != .prefer)
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        } else {
            configuration = .init(unixSocketPath: socketPath ?? "", username: user, password: password, database: database)
        }
        configuration.setOptions(connectTimeoutSeconds: 5, startupParameters: [("application_name", "itsme-relay")])
        return configuration
    }

    func clientConfiguration() throws -> PostgresClient.Configuration { try configuration() }

    func connectionConfiguration() throws -> PostgresConnection.Configuration { try configuration() }
}

/// What `DatabaseURL.configuration()` needs of PostgresNIO's two
/// configurations, which share no type: their TLS (`sslmode=prefer` is not
/// `required`), and their options.
protocol PostgresConfiguration {
    associatedtype TLS
    init(host: String, port: Int, username: String, password: String?, database: String?, tls: TLS)
    init(unixSocketPath: String, username: String, password: String?, database: String?)
    /// No TLS when `configuration` is nil.
    static func tls(_ configuration: TLSConfiguration?, required: Bool) throws -> TLS
    mutating func setOptions(connectTimeoutSeconds: Int64, startupParameters: [(String, String)])
}

extension PostgresClient.Configuration: PostgresConfiguration {
    static func tls(_ configuration: TLSConfiguration?, required: Bool) -> TLS {
        guard let configuration else { return .disable }
        return required ? .require(configuration) : .prefer(configuration)
    }

    mutating func setOptions(connectTimeoutSeconds: Int64, startupParameters: [(String, String)]) {
        options.connectTimeout = .seconds(connectTimeoutSeconds)
        options.additionalStartupParameters = startupParameters
    }
}

extension PostgresConnection.Configuration: PostgresConfiguration {
    static func tls(_ configuration: TLSConfiguration?, required: Bool) throws -> TLS {
        guard let configuration else { return .disable }
        let context = try NIOSSLContext(configuration: configuration)
        return required ? .require(context) : .prefer(context)
    }

    mutating func setOptions(connectTimeoutSeconds: Int64, startupParameters: [(String, String)]) {
        options.connectTimeout = .seconds(connectTimeoutSeconds)
        options.additionalStartupParameters = startupParameters
    }
}
