import ItsMePrimitives

/// IDs and bearer tokens (docs/PROTOCOL.md 15.1).
enum RelayID {
    /// 16 bytes as 32 lower-case hex characters.
    static func isValid(_ id: some StringProtocol) -> Bool {
        id.utf8.count == 32 && id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// What logs may show of an ID.
    static func short(_ id: some StringProtocol) -> String { String(id.prefix(8)) }
}

enum Token {
    static let byteCount = 32

    /// A new token: its text for the client, its hash for the database.
    static func make() -> (text: String, hash: [UInt8]) {
        var rng = SystemRandom()
        let bytes = rng.bytes(byteCount)
        return (Base64.encode(bytes, .urlUnpadded), SHA256.hash(bytes))
    }

    /// The hash of a presented token, or nil if it is not 32 bytes of
    /// unpadded base64url.
    static func hash(ofPresented text: some StringProtocol) -> [UInt8]? {
        guard text.utf8.count == 43, let bytes = Base64.decode(text, .urlUnpadded), bytes.count == byteCount else {
            return nil
        }
        return SHA256.hash(bytes)
    }

    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && ConstantTime.equal(a, b)
    }
}
