import Foundation
import ItsMeKit
import NIOSSL
import ItsMeRelayProtocol

/// The relay's base URL, parsed once: `http://` or `https://` (also accepted:
/// `ws://` and `wss://`, the same relay), a host name or IPv4 address, an
/// optional port and an optional path prefix, as in
/// `https://relay.example:8443/itsme`. The invite mailbox speaks HTTP(S)
/// to it; rooms are WebSockets on the same host, port and prefix (`ws://`,
/// or `wss://` for TLS).
///
/// Refused, with a `RelayError` of kind `"bad-url"`: another scheme, no
/// host, a user name or password, a query or fragment, a port outside 1 to
/// 65535, characters a URL cannot hold, and IPv6 address literals (give a
/// host name instead).
public struct RelayURL: Sendable, CustomStringConvertible {
    /// The URL as given (surrounding white space removed).
    public let text: String
    /// True for `https://` and `wss://`: TLS, with `tlsConfiguration`.
    public let isSecure: Bool
    /// The host name or IPv4 address, in lower case.
    public let host: String
    /// The port: the one given, else 443 (secure) or 80.
    public let port: Int
    /// The path prefix every route is appended to: empty, or starting with
    /// `/` and without a trailing `/`.
    public let pathPrefix: String
    /// The TLS settings of secure connections. The default checks the
    /// relay's certificate against the system's trust roots and its host
    /// name; a program may add a trust root (for a private relay) here.
    public var tlsConfiguration: TLSConfiguration
    private let explicitPort: Bool

    /// Parses `text`; throws `RelayError` (kind `"bad-url"`) with a line
    /// saying what is wrong.
    public init(_ text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        func bad(_ why: String) -> RelayError {
            RelayError("the relay URL \(Self.shown(trimmed)) \(why)", kind: "bad-url")
        }
        guard let separator = trimmed.range(of: "://") else {
            throw bad("is not an http:// or https:// URL")
        }
        let scheme = trimmed[..<separator.lowerBound].lowercased()
        switch scheme {
        case "http", "ws": isSecure = false
        case "https", "wss": isSecure = true
        default: throw bad("is not an http:// or https:// URL")
        }
        let rest = trimmed[separator.upperBound...]
        guard !rest.contains("?"), !rest.contains("#") else { throw bad("must not carry a query or fragment") }
        let authority = rest.prefix { $0 != "/" }
        let path = rest[authority.endIndex...]
        guard !authority.contains("@") else { throw bad("must not carry a user name or password") }
        guard !authority.hasPrefix("[") else { throw bad("holds an IPv6 address: give the relay's host name instead") }

        var hostPart = authority[...]
        var portNumber: Int?
        if let colon = authority.firstIndex(of: ":") {
            hostPart = authority[..<colon]
            let digits = authority[authority.index(after: colon)...]
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
                let number = Int(digits), (1...65535).contains(number)
            else { throw bad("has an invalid port (1 to 65535)") }
            portNumber = number
        }
        guard !hostPart.isEmpty else { throw bad("has no host") }
        guard hostPart.utf8.count <= 253,
            hostPart.unicodeScalars.allSatisfy({ Self.hostCharacters.contains($0) }),
            !hostPart.hasPrefix("."), !hostPart.hasPrefix("-")
        else { throw bad("has an invalid host name") }

        var prefix = String(path)
        while prefix.hasSuffix("/") { prefix.removeLast() }
        guard Self.isValidPath(prefix) else { throw bad("has characters a URL path cannot hold") }

        self.text = trimmed
        self.host = hostPart.lowercased()
        self.port = portNumber ?? (isSecure ? 443 : 80)
        self.explicitPort = portNumber != nil
        self.pathPrefix = prefix
        self.tlsConfiguration = TLSConfiguration.makeClientConfiguration()
    }

    /// The URL as given.
    public var description: String { text }

    /// Trusts, besides the system's roots (or `$SSL_CERT_FILE`'s), the
    /// certificates in the PEM file at `path`: a private relay's own
    /// certificate authority or self-signed certificate. `.invalidArgument`,
    /// naming the file and why, if it cannot be read or holds none.
    public mutating func addTrustRoots(pemFile path: String) throws {
        let certificates = try Self.pemCertificates(path, named: path)
        tlsConfiguration.additionalTrustRoots.append(.certificates(certificates))
    }

    private static let hostCharacters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
    private static let pathCharacters = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/")

    /// RFC 3986 path characters, with `%` only before two hex digits.
    private static func isValidPath(_ path: String) -> Bool {
        let scalars = Array(path.unicodeScalars)
        var i = 0
        while i < scalars.count {
            let c = scalars[i]
            if c == "%" {
                guard i + 2 < scalars.count, scalars[i + 1].properties.isASCIIHexDigit, scalars[i + 2].properties.isASCIIHexDigit
                else { return false }
                i += 3
                continue
            }
            guard pathCharacters.contains(c) else { return false }
            i += 1
        }
        return true
    }

    /// A URL in an error message: quoted, cut short, control characters out.
    static func shown(_ text: String) -> String {
        let clean = String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : Character($0) })
        return "\"" + (clean.count > 80 ? String(clean.prefix(80)) + "..." : clean) + "\""
    }

    /// The `Host` header: the host, and the port when one was given.
    var hostHeader: String { explicitPort ? "\(host):\(port)" : host }
    /// Where the relay is, for messages: `host:port` (IPv6 addresses are
    /// refused, so the host holds no colon).
    var place: String { "\(host):\(port)" }

    /// The name sent for TLS's server name indication: none for an IP
    /// address (the certificate is then checked against the address).
    var serverName: String? {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        let isIPv4 = parts.count == 4 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
        return isIPv4 ? nil : host
    }
}

// MARK: Checks shared by the routes

enum Checks {
    /// 32 lowercase hex characters (docs/PROTOCOL.md 15.1).
    static func id(_ value: String, _ what: String) throws {
        guard RelayProtocol.isID(value) else { throw ItsMeError(.invalidArgument, "\(what) must be 32 lowercase hex digits") }
    }

    static func token(_ value: String) throws {
        guard RelayProtocol.isToken(value) else { throw ItsMeError(.invalidArgument, "token must be the 43 base64url characters the relay gave") }
    }

    /// A number of seconds given by the caller: finite and not negative
    /// (infinity is taken as a very long time).
    static func seconds(_ value: Double, _ what: String) throws -> Double {
        guard !value.isNaN, value >= 0 else { throw ItsMeError(.invalidArgument, "\(what) must be a number of seconds, 0 or more") }
        return min(value, maxSeconds)
    }

    static let maxSeconds = 1e8

}
