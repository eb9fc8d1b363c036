import ItsMePrimitives
import ItsMeRelayProtocol

/// Bearer tokens (docs/PROTOCOL.md 15.1; their form: `RelayProtocol`).
enum Token {
    static let byteCount = RelayProtocol.tokenByteCount

    /// A new token: its text for the client, its hash for the database.
    static func make() -> (text: String, hash: [UInt8]) {
        var rng = SystemRandom()
        let bytes = rng.bytes(byteCount)
        return (Base64.encode(bytes, .urlUnpadded), SHA256.hash(bytes))
    }

    /// The hash of a presented token, or nil if it is not 32 bytes of
    /// unpadded base64url.
    static func hash(ofPresented text: some StringProtocol) -> [UInt8]? {
        guard RelayProtocol.isToken(text), let bytes = Base64.decode(text, .urlUnpadded), bytes.count == byteCount else {
            return nil
        }
        return SHA256.hash(bytes)
    }

    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && ConstantTime.equal(a, b)
    }
}
