import Foundation

/// The proxies whose `X-Forwarded-For` the relay believes
/// (`--trusted-proxy`): addresses and CIDR ranges, IPv4 and IPv6.
///
/// Behind them, the client is the last address of `X-Forwarded-For` that
/// is not itself a trusted proxy (a proxy appends the address it saw;
/// whatever a client wrote before is not believed), and a connection from a
/// trusted proxy is exempt from the per-address connection limit: the
/// proxy carries many clients, and limits them itself (docs/OPERATIONS.md).
public struct TrustedProxies: Sendable, Equatable, CustomStringConvertible {
    /// One address or range: its bytes (4 or 16) with the host bits zero,
    /// and the prefix length.
    struct Range: Sendable, Equatable {
        let bytes: [UInt8]
        let prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var left = prefix
            for (a, b) in zip(address, bytes) {
                guard left > 0 else { return true }
                let mask: UInt8 = left >= 8 ? 0xFF : ~(0xFF >> UInt8(left))
                guard a & mask == b else { return false }
                left -= 8
            }
            return true
        }
    }

    private(set) var ranges: [Range] = []
    /// The entries as given, for the logs.
    private var entries: [String] = []

    /// None: every client address is the TCP peer's.
    public init() {}

    /// Parses `--trusted-proxy` values: each an address (`10.0.0.7`,
    /// `::1`) or a CIDR range (`10.0.0.0/8`, `fd00::/8`), several in one
    /// value separated by commas. Throws `TrustedProxyError` for an entry
    /// that is none of these.
    public init(parsing values: [String]) throws {
        for value in values {
            for part in value.split(separator: ",", omittingEmptySubsequences: false) {
                let entry = part.trimmingCharacters(in: .whitespaces)
                guard !entry.isEmpty else { throw TrustedProxyError(entry: value, reason: "has an empty entry") }
                ranges.append(try Self.range(entry))
                entries.append(entry)
            }
        }
    }

    public var isEmpty: Bool { ranges.isEmpty }

    public var description: String { entries.isEmpty ? "none" : entries.joined(separator: ",") }

    /// True when `address` (a TCP peer's, as NIO writes it) is a trusted proxy.
    public func contains(_ address: String) -> Bool {
        guard !ranges.isEmpty, let bytes = Self.address(address) else { return false }
        return ranges.contains { $0.contains(bytes) }
    }

    /// The client address of a request from `peer` carrying
    /// `forwardedFor`: the peer's unless it is a trusted proxy; then the
    /// last forwarded address that is not a trusted proxy (or the first, if
    /// all are), in canonical form.
    public func clientAddress(peer: String, forwardedFor: String?) -> String {
        guard contains(peer), let forwardedFor else { return peer }
        let hops = forwardedFor.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !hops.isEmpty else { return peer }
        for hop in hops.reversed() where !contains(hop) {
            return Self.canonical(hop)
        }
        return Self.canonical(hops[0])
    }

    // MARK: Parsing

    private static func range(_ entry: String) throws -> Range {
        let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = parse(String(parts[0])) else {
            throw TrustedProxyError(entry: entry, reason: "is not an IPv4 or IPv6 address or CIDR range")
        }
        let bits = bytes.count * 8
        guard parts.count == 2 else { return Range(bytes: bytes, prefix: bits) }
        let digits = parts[1]
        guard !digits.isEmpty, digits.count <= 3, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let prefix = Int(digits),
            prefix <= bits
        else {
            throw TrustedProxyError(entry: entry, reason: "has a prefix length that is not 0 to \(bits)")
        }
        let range = Range(bytes: masked(bytes, prefix), prefix: prefix)
        guard range.bytes == bytes else {
            throw TrustedProxyError(
                entry: entry, reason: "sets bits beyond its /\(prefix) (the range is \(text(range.bytes))/\(prefix))")
        }
        return range
    }

    private static func masked(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        var left = prefix
        return bytes.map { byte in
            defer { left -= 8 }
            if left >= 8 { return byte }
            if left <= 0 { return 0 }
            return byte & ~(0xFF >> UInt8(left))
        }
    }

    /// The bytes of an address written in standard form (no zone, no brackets).
    static func parse(_ text: String) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// A peer's or a forwarded address as bytes: an IPv6 zone is dropped,
    /// and an IPv4-mapped IPv6 address (a relay listening on `::`) is taken
    /// as the IPv4 address it carries.
    static func address(_ text: String) -> [UInt8]? {
        var bare = Substring(text)
        if bare.hasPrefix("["), bare.hasSuffix("]") { bare = bare.dropFirst().dropLast() }
        if let percent = bare.firstIndex(of: "%") { bare = bare[..<percent] }
        guard let bytes = parse(String(bare)) else { return nil }
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return Array(bytes[12...])
        }
        return bytes
    }

    /// An address in the form inet_ntop writes; text that is no address as it is.
    static func canonical(_ text: String) -> String {
        address(text).map(Self.text) ?? text
    }

    static func text(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let written = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else { return "?" }
        return String(cString: buffer)
    }
}

/// A `--trusted-proxy` entry that is not an address or a CIDR range.
public struct TrustedProxyError: Error, CustomStringConvertible, Sendable {
    public let entry: String
    public let reason: String

    public var description: String { "--trusted-proxy \"\(entry)\" \(reason)" }
}
